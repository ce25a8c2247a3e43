"""The reference archive (fedrepro.runs.archive, issue 56): runs restored from it read as the runs
that were archived, it is refused when damaged or edited, and a pass with it off trains them."""
import gzip
import json

import pytest

import fedrepro
from fedrepro.errors import ArchivedRunError, ConfigError, CorruptCacheError
from fedrepro.execute.executors import pending
from fedrepro.runs import archive
from fedrepro.runs.store import RunStore


@pytest.fixture
def archived(tiny, tmp_path, monkeypatch):
    """A trained tiny run, archived under a temporary archive root, and the same config pointed at an
    empty store."""
    cfg = tiny()
    res = fedrepro.run(cfg)
    root = tmp_path / "archives"
    folder = root / cfg.profile
    archive.write(folder, "tiny", [res], {"commit": "abc1234", "cpu": "test CPU", "date": "2026-12-02"})
    monkeypatch.setenv(archive.ENV_ROOT, str(root))
    monkeypatch.delenv(archive.ENV, raising=False)
    return cfg, res, folder, cfg.replace(runs_dir=str(tmp_path / "fresh"))


def test_a_run_missing_from_the_store_is_read_from_the_archive_as_it_was_trained(archived):
    cfg, res, folder, fresh = archived
    assert RunStore(fresh.runs_dir).status(fresh) == "missing"
    assert pending([fresh]) == []  # restored, nothing to train
    got = fedrepro.run(fresh)
    assert got.archived and not res.archived
    assert got.summary == res.summary
    assert got.rounds.equals(res.rounds) and got.clients.equals(res.clients)
    with pytest.raises(ArchivedRunError, match="reference archive"):
        got.final_state()
    # What a notebook's table reads: the same numbers.
    a = fedrepro.run_grid(fresh, seeds=[cfg.seed], progress=False)
    b = fedrepro.run_grid(cfg, seeds=[cfg.seed], progress=False)
    assert a.drop(columns=["path"]).equals(b.drop(columns=["path"]))


def test_with_the_archive_off_a_restored_run_is_trained_and_gives_the_same_numbers(archived, monkeypatch, caplog):
    cfg, res, folder, fresh = archived
    fedrepro.run(fresh)  # restored
    monkeypatch.setenv(archive.ENV, "off")
    assert [c.hash() for c in pending([fresh])] == [fresh.hash()]
    with caplog.at_level("WARNING", logger="fedrepro"):
        trained = fedrepro.run(fresh)
    assert not trained.archived and trained.summary["final_acc_mean"] == res.summary["final_acc_mean"]
    trained.final_state()  # weights exist now
    # The log says why it trains again: the archive, not other code (which it was not trained by).
    said = " ".join(r.getMessage() for r in caplog.records if "training it anew" in r.getMessage())
    assert "came from the reference archive (FEDREPRO_ARCHIVE=off" in said and "other code" not in said


def test_the_archive_off_restores_nothing(archived, monkeypatch):
    cfg, res, folder, fresh = archived
    monkeypatch.setenv(archive.ENV, "off")
    assert archive.restore_missing([fresh]) == 0 and RunStore(fresh.runs_dir).status(fresh) == "missing"
    monkeypatch.setenv(archive.ENV, "sometimes")
    with pytest.raises(ConfigError, match="FEDREPRO_ARCHIVE='sometimes'; valid: read, off"):
        archive.policy()


def _one_line(e: Exception, path) -> None:
    msg = str(e)
    assert "\n" not in msg and str(path) in msg


def test_a_damaged_archive_file_is_refused_naming_it(archived):
    cfg, res, folder, fresh = archived
    f = folder / "tiny.jsonl.gz"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    archive._LOADED.clear()
    with pytest.raises(CorruptCacheError) as e:
        pending([fresh])
    _one_line(e.value, f)
    assert RunStore(fresh.runs_dir).status(fresh) == "missing"  # nothing half-written


def test_an_edited_run_whose_manifest_was_rewritten_is_refused_by_the_runs_own_record(archived):
    """Whoever rewrites an entry and the manifest's sha256 still cannot change a run's numbers: each
    file is checked against the sha256 its summary records."""
    cfg, res, folder, fresh = archived
    f = folder / "tiny.jsonl.gz"
    line = json.loads(gzip.decompress(f.read_bytes()))
    line["files"]["rounds.jsonl"] = line["files"]["rounds.jsonl"].replace('"acc_mean": 0.', '"acc_mean": 0.9', 1)
    f.write_bytes(archive._gzip([json.dumps(line)]))
    manifest = json.loads((folder / archive.MANIFEST).read_text())
    manifest["files"]["tiny.jsonl.gz"]["sha256"] = archive._sha(f.read_bytes())
    (folder / archive.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CorruptCacheError, match="rounds.jsonl does not match") as e:
        pending([fresh])
    _one_line(e.value, f)
    assert RunStore(fresh.runs_dir).status(fresh) == "missing"


@pytest.mark.parametrize("manifest", ["not json", "{}", '{"format": "fedrepro-archive/1", "files": {"../x": {}}}'])
def test_a_manifest_that_is_not_one_is_refused_naming_it(archived, manifest):
    cfg, res, folder, fresh = archived
    (folder / archive.MANIFEST).write_text(manifest)
    with pytest.raises(CorruptCacheError) as e:
        pending([fresh])
    _one_line(e.value, folder / archive.MANIFEST)


def test_the_same_runs_give_the_same_archive_bytes(archived, tmp_path):
    cfg, res, folder, fresh = archived
    again = archive.write(tmp_path / "again", "tiny", [res], {"commit": "abc1234", "cpu": "test CPU",
                                                              "date": "2026-12-02"})
    assert again.read_bytes() == (folder / "tiny.jsonl.gz").read_bytes()


def test_a_grid_says_which_of_its_runs_came_from_the_archive(archived, capsys):
    cfg, res, folder, fresh = archived
    fedrepro.run_grid(fresh, seeds=[cfg.seed], progress=False)
    out = capsys.readouterr().out
    assert "1 of 1 runs read from the reference archive (commit abc1234, test CPU, 2026-12-02)" in out
    fedrepro.run_grid(cfg, seeds=[cfg.seed], progress=False)  # trained here: nothing said
    assert "reference archive" not in capsys.readouterr().out


def test_fedrepro_archive_writes_the_runs_a_pass_traced_per_paper_and_refuses_restored_ones(tiny, tmp_path,
                                                                                           monkeypatch):
    from fedrepro.app.archive_pass import archive_pass
    from fedrepro.env import settings

    monkeypatch.setenv(settings.ENV_OUTPUT, str(tmp_path / "out"))
    monkeypatch.delenv(settings.ENV_RUNS, raising=False)
    cfg = tiny()
    res = fedrepro.run(cfg)
    trace_dir = settings.output_path("trace", "smoke", create=True)
    nb = "pfedcspc/01_global_and_personalized.ipynb"
    (trace_dir / fedrepro.env.trace.notebook_file(nb)).write_text(
        json.dumps({"event": "run", "hash": cfg.hash(), "trained": True}) + "\n")
    written = archive_pass("smoke", "pfedcspc/01", runs_dir=tmp_path / "runs", folder=tmp_path / "arch")
    assert list(written) == ["pfedcspc"]
    manifest = json.loads((tmp_path / "arch" / archive.MANIFEST).read_text())["files"]["pfedcspc.jsonl.gz"]
    assert manifest["runs"] == 1 and manifest["source"]["notebooks"] == [nb]
    assert archive.Archive(tmp_path / "arch").get(cfg.hash()).files["summary.json"] == \
        (res.path / "summary.json").read_text()
    with pytest.raises(ConfigError, match="no trace"):
        archive_pass("smoke", "fedotp", runs_dir=tmp_path / "runs", folder=tmp_path / "arch")
    # A run restored from an archive is not this pass's: refused by name.
    monkeypatch.setenv(archive.ENV_ROOT, str(tmp_path / "roots"))
    monkeypatch.delenv(archive.ENV, raising=False)
    archive.write(tmp_path / "roots" / "smoke", "x", [res], {"commit": "c"})
    restored = tmp_path / "restored"
    assert archive.restore_missing([cfg.replace(runs_dir=str(restored))]) == 1
    with pytest.raises(ConfigError, match="restored from the reference archive"):
        archive_pass("smoke", "pfedcspc/01", runs_dir=restored, folder=tmp_path / "arch2")


def test_verify_sample_retrains_archived_runs_of_every_method_and_finds_them_identical(tiny, tmp_path, monkeypatch):
    from fedrepro.app.verify import sample_archive, verify_archive

    runs = [fedrepro.run(tiny(**{"method.name": m, "seed": s})) for m in ("fedavg", "local") for s in (0, 1)]
    root = tmp_path / "archives"
    archive.write(root / "smoke", "tiny", runs, {"commit": "abc1234"})
    monkeypatch.setenv(archive.ENV_ROOT, str(root))
    monkeypatch.delenv(archive.ENV, raising=False)
    arch = archive.Archive(root / "smoke")
    methods = {h: json.loads(arch.runs[h].files["config.json"])["config"]["method"]["name"] for h in arch.runs}
    for seed in range(4):  # two draws cover both methods, whatever the seed
        assert {methods[h] for h in sample_archive(arch, 2, seed)} == {"fedavg", "local"}
    assert sorted(sample_archive(arch, 10)) == sorted(arch.runs)
    results = verify_archive("smoke", 2, workers=1, progress=False)
    assert [v.outcome for v in results] == ["identical", "identical"]
    with pytest.raises(ConfigError, match="--sample 0"):
        sample_archive(arch, 0)


def test_the_reproduction_report_compares_runs_and_verdicts_with_the_archive(tiny, tmp_path, monkeypatch):
    from fedrepro.app.compare import TOLERANCE, compare_claims, compare_runs, write_report
    from fedrepro.env import settings

    monkeypatch.setenv(settings.ENV_OUTPUT, str(tmp_path / "out"))
    monkeypatch.setenv(archive.ENV_ROOT, str(tmp_path / "archives"))
    monkeypatch.delenv(archive.ENV, raising=False)
    a, b = tiny(), tiny(seed=1)
    runs = [fedrepro.run(a), fedrepro.run(b)]
    folder = tmp_path / "archives" / "smoke"
    archive.write(folder, "tiny", runs, {"commit": "abc1234", "cpu": "CPU A", "date": "2026-12-01"})
    record = {"notebook": "x", "claims": [
        {"claim_id": "tiny.one", "paper": "tiny", "verdict": "PASS", "effect": "+3"},
        {"claim_id": "tiny.two", "paper": "tiny", "verdict": "FAIL", "effect": "-1"}]}
    archive.write_claims(folder, {"tiny_01_x.json": json.dumps(record).encode()})
    # This pass: the same two runs trained in its own store; one claim's verdict changed.
    mine = tmp_path / "mine"
    monkeypatch.setenv(archive.ENV, "off")  # as reproduce trains
    for c in (a, b):
        fedrepro.run(c.replace(runs_dir=str(mine)))
    claims = settings.output_path("claims", "smoke", create=True)
    (claims / "tiny_01_x.json").write_text(json.dumps(
        {**record, "claims": [{**record["claims"][0]}, {**record["claims"][1], "verdict": "INCONCLUSIVE"}]}))
    got = {r.hash: r.outcome for r in compare_runs("smoke", mine)}
    assert got == {a.hash(): "identical", b.hash(): "identical"}
    assert [(c.claim_id, c.archived, c.now) for c in compare_claims("smoke")] == \
        [("tiny.one", "PASS", "PASS"), ("tiny.two", "FAIL", "INCONCLUSIVE")]
    page = write_report("smoke", tmp_path / "pages", mine).read_text()
    assert "1 of the 2 archived claims that this pass checked again have the same verdict; 1 changed" in page
    assert "| identical | 2 |" in page and "commit abc1234, CPU A, 2026-12-01" in page
    # A store that only restored the archive's runs trained nothing to compare.
    assert {r.outcome for r in compare_runs("smoke", tmp_path / "empty")} == {"not trained here"}
    assert TOLERANCE > 0


def test_the_committed_archive_is_whole_small_and_each_of_its_runs_checks():
    """results/<profile>/: every file matches the manifest, every run its own summary's record, and
    the archive stays within the 50 MB the repository allows it (issue 56)."""
    from fedrepro.env.host import repo_root

    root = repo_root() / "results"
    folders = [f for f in sorted(root.iterdir()) if (f / archive.MANIFEST).is_file()] if root.is_dir() else []
    if not folders:
        pytest.skip("no reference archive committed")
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert total <= 50 << 20, f"the reference archive holds {total / 2**20:.1f} MiB, more than 50"
    for folder in folders:
        arch = archive.Archive(folder)
        assert arch.runs and arch.claims()
        for run in arch.runs.values():
            archive.check_files(run, folder / run.archive_file)


def test_a_notebook_reading_the_archive_plans_the_seed_stages_its_pass_reached(archived, monkeypatch):
    """Issue 56 item 7: the archive keeps each table's seed stage, and claim seeds read it while runs
    are read from the archive (not with the archive off, which a training pass uses)."""
    from fedrepro.papers import claim_seeds

    cfg, res, folder, fresh = archived
    archive.write_stages(folder, {"pfedcspc/alignment": 8})
    archive.write_stages(folder, {"pfedcspc/alignment": 5, "pfedcspc/rounds_default": 12})  # never lowered
    assert archive.Archive(folder).stages() == {"pfedcspc/alignment": 8, "pfedcspc/rounds_default": 12}
    assert claim_seeds(cfg.profile, "pfedcspc/alignment") == list(range(8))
    assert claim_seeds(cfg.profile, "pfedcspc/other") == claim_seeds(cfg.profile)
    monkeypatch.setenv(archive.ENV, "off")
    assert claim_seeds(cfg.profile, "pfedcspc/alignment") == claim_seeds(cfg.profile)


@pytest.mark.parametrize("stages", [{"t": 0}, {"t": "8"}, {"t": 2.5}])
def test_seed_stages_that_are_not_positive_counts_are_refused(archived, stages):
    cfg, res, folder, fresh = archived
    with pytest.raises(ConfigError, match="seed stages"):
        archive.write_stages(folder, stages)
    manifest = json.loads((folder / archive.MANIFEST).read_text())
    manifest["stages"] = stages
    (folder / archive.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CorruptCacheError) as e:
        archive.Archive(folder).stages()
    _one_line(e.value, folder / archive.MANIFEST)


def _committed_archives():
    from fedrepro.env.host import repo_root

    root = repo_root() / "results" / "laptop"
    if not (root / archive.MANIFEST).is_file():
        pytest.skip("no reference archive committed")
    return archive.Archive(root)


def test_the_committed_archive_holds_the_stages_its_own_records_rest_on(monkeypatch):
    """The stages in the manifest are those the archived claim records read (fedrepro.papers.plan.
    recorded_stages), and every run a laptop notebook of an archived paper plans at those stages is in
    the archive (those its learning-rate searches choose are checked by rendering: make figures)."""
    from fedrepro.env.host import repo_root
    from fedrepro.papers.plan import plan, recorded_stages

    monkeypatch.delenv(archive.ENV_ROOT, raising=False)
    monkeypatch.setenv(archive.ENV, "read")
    arch = _committed_archives()
    recorded = {row["claim_id"]: {**row, "notebook": rec["notebook"]}
                for rec in arch.claims().values() for row in rec["claims"]}
    nb_root = repo_root() / "notebooks"
    for name, info in arch.manifest["files"].items():
        notebooks = [nb_root / nb for nb in info["source"]["notebooks"]]
        paper = name.removesuffix(".jsonl.gz")
        stages = recorded_stages(notebooks, nb_root, "laptop", recorded)
        assert stages == {k: v for k, v in arch.stages().items() if k.startswith(paper + "/")}
        planned = plan(notebooks, nb_root, "laptop").runs
        missing = sorted(h for h in planned if h not in arch.runs)
        assert not missing, f"{len(missing)} of {len(planned)} runs {paper}'s notebooks plan are not archived"


def test_an_unfinished_pass_is_archived_partial_and_the_next_machine_continues_it(tiny, tmp_path, monkeypatch):
    """A pass longer than a machine's loan: `fedrepro archive --partial` keeps every finished run of
    the paper, marked partial; under FEDREPRO_ARCHIVE=resume the next store restores those (and no
    run of a finished file), trains the rest, and archiving again keeps the restored runs."""
    from fedrepro.app.archive_pass import archive_pass
    from fedrepro.env import settings

    monkeypatch.setenv(settings.ENV_OUTPUT, str(tmp_path / "out"))
    monkeypatch.delenv(settings.ENV_RUNS, raising=False)
    monkeypatch.setenv(archive.ENV_ROOT, str(tmp_path / "roots"))
    folder = tmp_path / "roots" / "smoke"
    first, second, third = (tiny(seed=s, runs_dir=str(tmp_path / "machine1")) for s in (0, 1, 2))
    for cfg in (first, second):
        fedrepro.run(cfg)
    with pytest.raises(ConfigError, match="one paper"):
        archive_pass("smoke", "fedpft,pfedcspc", runs_dir=tmp_path / "machine1", folder=folder, partial=True)
    archive_pass("smoke", "pfedcspc", runs_dir=tmp_path / "machine1", folder=folder, partial=True)
    info = archive.Archive(folder).manifest["files"]["pfedcspc.jsonl.gz"]
    assert info["runs"] == 2 and info["source"]["partial"] is True
    # Another paper's finished file is not a pass to continue.
    other = fedrepro.run(tiny(seed=7, runs_dir=str(tmp_path / "elsewhere")))
    archive.write(folder, "fedpft", [other], {"commit": "c"})

    monkeypatch.setenv(archive.ENV, "resume")
    machine2 = [c.replace(runs_dir=str(tmp_path / "machine2")) for c in (first, second, third)]
    todo = pending([*machine2, other.config.replace(runs_dir=str(tmp_path / "machine2"))])
    assert {c.seed for c in todo} == {2, 7}  # seeds 0, 1 restored from the partial file; 7 not
    fedrepro.run(machine2[2])
    archive_pass("smoke", "pfedcspc", runs_dir=tmp_path / "machine2", folder=folder, partial=True)
    arch = archive.Archive(folder)
    assert {first.hash(), second.hash(), third.hash()} <= set(arch.runs)
    assert arch.get(first.hash()).files["summary.json"] == (RunStore(first.runs_dir).path(first) / "summary.json"
                                                            ).read_text()
    # Under read (a notebook), the partial file serves like any other; off retrains its runs.
    monkeypatch.setenv(archive.ENV, "off")
    assert len(pending(machine2)) == 2  # the two restored ones count as not trained here


def _claims_section(page: str) -> str:
    """A results page from its claims table on: what a pass's records decide (the header above it
    names commits and the code changed since, which every later commit changes)."""
    return page[page.index("\n## Claims"):]


def test_the_committed_pages_of_archived_papers_render_again_from_the_archive(tmp_path, monkeypatch):
    """Issue 56 item 5: the pages of a paper whose pass is archived are what its archived records
    give, beside the other notebooks' kept records (as `fedrepro results` after that pass)."""
    import shutil

    from fedrepro.app.results_page import write_pages
    from fedrepro.env import settings
    from fedrepro.env.host import repo_root

    arch = _committed_archives()
    records = arch.claims()
    out = tmp_path / "out"
    kept, raw = out / "docs" / "results" / "laptop" / "claims", out / "output" / "laptop" / "claims"
    kept.mkdir(parents=True)
    raw.mkdir(parents=True)
    committed = repo_root() / "docs" / "results" / "laptop"
    for f in (committed / "claims").glob("*.json"):
        if f.name not in records:
            shutil.copy(f, kept / f.name)
    for name in records:
        (raw / name).write_bytes((arch.folder / "claims" / name).read_bytes())
    monkeypatch.setenv(settings.ENV_OUTPUT, str(out))
    monkeypatch.delenv(settings.ENV_RUNS, raising=False)
    pages = write_pages("laptop", out)
    papers = sorted({name.removesuffix(".jsonl.gz") for name, info in arch.manifest["files"].items()
                     if not (info.get("source") or {}).get("partial")})
    assert papers
    for paper in papers:
        assert _claims_section(pages[paper].read_text()) == _claims_section((committed / f"{paper}.md").read_text()), \
            f"docs/results/laptop/{paper}.md is not what its archived records give: render the pages again"
