"""Issue 53, second probe: variants of the classes the threat model covers (docs/reliability.md,
"Threat model") that the first round of tests did not try. Each test plants what someone who can
write a store, an archive folder, an input file or a peer's reply could plant, and checks that the
reader gives a one-line error naming it (or lists it as damaged), never a traceback, a hang, a
file written elsewhere or memory it was not meant to take."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import fedrepro
from fedrepro.app.verify import compare_lines, compare_states, sample_archive
from fedrepro.errors import CorruptCacheError, FederationError
from fedrepro.runs import archive
from fedrepro.runs.catalog import list_runs, read_run, write_csv
from fedrepro.runs.store import CHECKPOINT_HEADER, RunResult, RunStore, checkpoint_bytes
from support import tiny_config


class _Stop(Exception):
    pass


def _stop(state):
    raise _Stop()


# Deeper than Python's recursion limit, and still a few hundred kilobytes.
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store with a finished run and one interrupted after its first round (copied per test)."""
    tmp = tmp_path_factory.mktemp("probe2")
    done = tiny_config(tmp, **{"train.rounds": 2})
    cut = done.replace(seed=2, **{"train.rounds": 3})
    fedrepro.run(done)
    with pytest.raises(_Stop):
        fedrepro.run(cut, on_round_end=_stop)
    return Path(done.runs_dir), done, cut


@pytest.fixture
def store(trained, tmp_path):
    root, done, cut = trained
    runs = tmp_path / "runs"
    shutil.copytree(root, runs, symlinks=True)
    for folder in [runs, *runs.iterdir()]:
        for f in [folder, *folder.iterdir()] if folder.is_dir() else [folder]:
            f.chmod(f.stat().st_mode | 0o200)
    return runs, done.replace(runs_dir=str(runs)), cut.replace(runs_dir=str(runs))


def one_line_naming(err: BaseException | str, path: Path | str) -> None:
    text = str(err)
    assert "\n" not in text.strip(), text
    assert str(path) in text, text


def _rewrite(folder: Path, name: str, data: bytes) -> None:
    """Replace a finished run's file ``name`` and rewrite its sha256 record, as a store writer can."""
    (folder / name).write_bytes(data)
    summary = json.loads((folder / "summary.json").read_text())
    summary["files_sha256"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (folder / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _deflated(data: bytes) -> bytes:
    """The torch archive ``data`` with its entries compressed: torch.load reads it all the same."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            z.writestr(info.filename, src.read(info.filename), compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


# --------------------------------------------------------------------------------------------
# JSON nested deeper than the recursion limit: damage, not a RecursionError


@pytest.mark.parametrize("name", ["summary.json", "config.json", "meta.json"])
def test_a_run_file_nested_too_deeply_is_damage_and_the_listing_goes_on(store, name, capsys):
    runs, done, cut = store
    folder = runs / done.hash()
    (folder / name).write_text(DEEP)
    table = list_runs(runs)
    assert set(table["hash"]) == {done.hash(), cut.hash()}
    assert table.set_index("hash").loc[done.hash(), "status"] == "damaged"
    shown = read_run(folder)
    assert shown.record["status"] == "damaged" and shown.problems
    with pytest.raises(CorruptCacheError) as err:
        RunStore(runs).load(done) if name != "config.json" else RunStore(runs).status(done)
    one_line_naming(err.value, folder)
    from fedrepro.app.cli import main
    assert main(["show", done.hash()[:8], "--runs-dir", str(runs)]) == 0
    assert "damaged" in capsys.readouterr().out


def test_a_rounds_line_nested_too_deeply_is_a_problem_of_show_not_a_traceback(store):
    runs, done, cut = store
    folder = runs / done.hash()
    with open(folder / "rounds.jsonl", "a") as f:
        f.write(DEEP + "\n")
    shown = read_run(folder)
    assert shown.record["status"] == "damaged"
    assert any("rounds.jsonl" in p for p in shown.problems), shown.problems


@pytest.mark.parametrize("value", [2.5, 10 ** 30, float("inf")], ids=["fraction", "huge", "infinity"])
def test_a_summary_whose_count_is_no_whole_number_leaves_its_cell_empty_not_the_listing(store, value, capsys):
    """A consistent forgery (its record rewritten) is served as the run's, but a round of 2.5 must not
    break the table of every run."""
    from fedrepro.app.cli import main
    from fedrepro.runs.store import _summary_digest

    runs, done, cut = store
    f = runs / done.hash() / "summary.json"
    summary = json.loads(f.read_text())
    record = summary.pop("files_sha256")
    summary["best_round"] = value
    record["summary.json"] = _summary_digest(summary)
    f.write_text(json.dumps({**summary, "files_sha256": record}))
    table = list_runs(runs).set_index("hash")
    assert table.loc[done.hash(), "status"] == "finished" and table["best_round"].isna()[done.hash()]
    assert main(["runs", "--runs-dir", str(runs)]) == 0
    assert cut.hash()[:8] in capsys.readouterr().out


_FORGED_TABLES = {
    "rounds_of_text": ("rounds.jsonl", '{"round": 1, "acc_mean": "abc", "time_train_s": "x"}\n'
                                       '{"round": 2, "acc_mean": [1], "time_train_s": 1}\n'),
    "rounds_not_objects": ("rounds.jsonl", "[1]\n[2]\n"),
    "clients_of_text": ("clients.jsonl", '{"round": 2, "client": "a", "acc": "x", "n_test": "q", "held_out": "yes"}\n'),
    "clients_unscored": ("clients.jsonl", '{"round": 2, "client": 0, "acc": null, "n_test": 0, "held_out": false}\n'),
    "clients_without_round": ("clients.jsonl", '{"round": [2], "client": 0}\n'),
}


@pytest.mark.parametrize("forged", list(_FORGED_TABLES))
def test_show_of_a_table_fedrepro_did_not_write_is_the_run_not_a_traceback(store, forged, capsys):
    """Its records rewritten, so every hash matches: the cells that are not numbers are shown empty."""
    from fedrepro.app.cli import main

    runs, done, cut = store
    name, text = _FORGED_TABLES[forged]
    _rewrite(runs / done.hash(), name, text.encode())
    assert main(["show", done.hash()[:8], "--runs-dir", str(runs), "--clients"]) == 0
    out = capsys.readouterr().out
    assert done.hash() in out and "per client" in out


# --------------------------------------------------------------------------------------------
# Input JSON files (claims records, timings, seed stages): bounded, never a FIFO or a device


# The reader in a child process that may not take more than 1 GiB (reading /dev/zero or a sparse
# file whole would) and, through the timeout, may not hang (opening a FIFO would).
_READ = ("import resource, sys; resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30)); "
         "from fedrepro.env.jsonfiles import read_json_file; from fedrepro.errors import CorruptCacheError\n"
         "try:\n    read_json_file(sys.argv[1], 'claims file', 'delete it'); print('read')\n"
         "except CorruptCacheError as e:\n    print('refused:', e)\n")


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "sparse", "deep"])
def test_an_input_json_file_is_read_bounded_and_never_waited_on(tmp_path, kind):
    f = tmp_path / "claims" / "smoke_01_x.json"
    f.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "dev_zero":
        os.symlink("/dev/zero", f)
    elif kind == "sparse":
        with open(f, "wb") as out:
            out.truncate(16 << 30)  # 16 GiB that take no disk
    else:
        f.write_text(DEEP)
    try:
        done = subprocess.run([sys.executable, "-c", _READ, str(f)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading a {kind} hung")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and len(lines) == 1 and lines[0].startswith("refused:"), \
        done.stdout + done.stderr[-2000:]
    one_line_naming(lines[0], f)


# --------------------------------------------------------------------------------------------
# Folders of the store that could be aimed elsewhere


def test_a_lock_folder_that_is_a_link_is_refused_and_nothing_written_through_it(store, tmp_path):
    runs, done, cut = store
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / f"{cut.hash()}.lock"  # a file there with the lock's name: it would be truncated
    victim.write_text("precious\n")
    shutil.rmtree(runs / ".locks")
    os.symlink(elsewhere, runs / ".locks")
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(cut)
    one_line_naming(err.value, runs / ".locks")
    assert victim.read_text() == "precious\n" and os.listdir(elsewhere) == [victim.name]
    assert not (runs / cut.hash() / "summary.json").exists()


def test_a_lock_folder_that_is_a_file_is_one_line(store):
    runs, done, cut = store
    shutil.rmtree(runs / ".locks")
    (runs / ".locks").write_text("x")
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(cut)
    one_line_naming(err.value, runs / ".locks")


def test_a_run_folder_that_is_a_link_is_neither_resumed_nor_written_through(store, tmp_path):
    runs, done, cut = store
    target = tmp_path / "target"
    shutil.move(runs / cut.hash(), target)
    os.symlink(target, runs / cut.hash())
    before = {f.name: f.read_bytes() for f in target.iterdir()}
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(cut)
    one_line_naming(err.value, runs / cut.hash())
    assert {f.name: f.read_bytes() for f in target.iterdir()} == before
    table = list_runs(runs).set_index("hash")
    assert table.loc[cut.hash(), "status"] == "damaged" and table.loc[done.hash(), "status"] == "finished"


@pytest.mark.parametrize("kind", ["dangling_link", "file"])
def test_a_run_folder_that_is_not_a_folder_is_one_line_naming_it(store, kind):
    runs, done, cut = store
    shutil.rmtree(runs / cut.hash())
    if kind == "file":
        (runs / cut.hash()).write_text("x")
    else:
        os.symlink(runs / "nowhere", runs / cut.hash())
    with pytest.raises(CorruptCacheError) as err:  # not "cannot write ...: make it writable"
        fedrepro.run(cut)
    one_line_naming(err.value, runs / cut.hash())


def test_sealing_a_run_never_changes_a_file_through_a_hard_link(store, tmp_path):
    runs, done, cut = store
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    victim.chmod(0o664)
    os.link(victim, runs / done.hash() / "notes.txt")  # writable: reusing the run tidies (seals) it
    assert fedrepro.run(done).summary["rounds"] == 2
    assert victim.stat().st_mode & 0o777 == 0o664
    assert not os.stat(runs / done.hash() / "summary.json").st_mode & 0o222


def test_a_run_folder_name_that_is_not_utf8_is_listed_and_exported(store, tmp_path):
    runs, done, cut = store
    os.mkdir(os.fsencode(runs) + b"/\xff\xfe")
    table = list_runs(runs)
    assert len(table) == 3 and (table["status"] == "damaged").sum() == 1
    out = write_csv(table, tmp_path / "runs.csv")
    assert "\\udcff" in out.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Checkpoints whose structure is not a run's state


def _ckpt_variants():
    def extra(st):
        st["evil"] = 1

    def missing(st):
        del st["shared"]

    def rows(st):
        st["round_rows"] = [{"x": 1}]

    def rows_int(st):
        st["round_rows"] = 5

    def clients(st):
        st["client_states"] = st["client_states"][:1]

    def far(st):
        st["next_round"] = 10 ** 9

    def negative(st):
        st["next_round"] = -5

    return [extra, missing, rows, rows_int, clients, far, negative]


@pytest.mark.parametrize("change", _ckpt_variants(), ids=lambda f: f.__name__)
def test_a_checkpoint_that_is_not_a_runs_state_is_one_line_for_resume_and_show(store, change):
    runs, done, cut = store
    folder = runs / cut.hash()
    ckpt = RunStore.load_checkpoint(folder)
    change(ckpt["state"])
    (folder / "checkpoint.pt").write_bytes(checkpoint_bytes(ckpt))  # with a header that matches it
    with pytest.raises(CorruptCacheError) as err:
        RunStore.load_checkpoint(folder)
    one_line_naming(err.value, folder / "checkpoint.pt")
    shown = read_run(folder)  # fedrepro show: the problem, not a traceback
    assert any("checkpoint.pt" in p for p in shown.problems), shown.problems


def test_resuming_a_checkpoint_that_is_not_a_runs_state_is_one_line(store):
    runs, done, cut = store
    folder = runs / cut.hash()
    ckpt = RunStore.load_checkpoint(folder)
    ckpt["state"]["client_states"] = []
    (folder / "checkpoint.pt").write_bytes(checkpoint_bytes(ckpt))
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(cut)
    one_line_naming(err.value, folder / "checkpoint.pt")


# --------------------------------------------------------------------------------------------
# Torch files whose entries are compressed: they could inflate a thousand times when read


def test_a_final_state_with_compressed_entries_is_refused_unread(store):
    runs, done, cut = store
    folder = runs / done.hash()
    state = RunResult(folder).final_state()
    state["shared"]["zeros"] = torch.zeros(1 << 20)  # 4 MiB that deflate to a few kilobytes
    data = _deflated(_torch_bytes(state))
    assert len(data) < 1 << 20
    _rewrite(folder, "final_state.pt", data)
    with pytest.raises(CorruptCacheError, match="compressed") as err:
        RunResult(folder).final_state()
    one_line_naming(err.value, folder / "final_state.pt")


def test_a_checkpoint_with_compressed_entries_is_refused_unread(store):
    runs, done, cut = store
    folder = runs / cut.hash()
    body = _deflated(_torch_bytes(RunStore.load_checkpoint(folder)))
    (folder / "checkpoint.pt").write_bytes(CHECKPOINT_HEADER + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    with pytest.raises(CorruptCacheError, match="compressed") as err:
        RunStore.load_checkpoint(folder)
    one_line_naming(err.value, folder / "checkpoint.pt")


# --------------------------------------------------------------------------------------------
# fedrepro verify: bit-identical means identical; a line that is no row is a difference


def test_verify_calls_a_bit_identical_state_holding_nan_identical(store, tmp_path):
    runs, done, cut = store
    a, b = tmp_path / "a" / done.hash(), tmp_path / "b" / done.hash()
    state = RunResult(runs / done.hash()).final_state()
    state["server_state"] = {"unset": torch.tensor([1.0, float("nan")])}
    data = _torch_bytes(state)
    for folder in (a, b):
        shutil.copytree(runs / done.hash(), folder)
        _rewrite(folder, "final_state.pt", data)
    assert compare_states(a, b) == ("identical", 0.0, "")


def test_verify_of_a_stored_line_that_is_no_row_is_a_difference(store, tmp_path):
    runs, done, cut = store
    stored = tmp_path / done.hash()
    shutil.copytree(runs / done.hash(), stored)
    stored.joinpath("rounds.jsonl").write_text("5\n" * 2)
    outcome, diff, where = compare_lines(stored, runs / done.hash())
    assert outcome == "different" and "rounds.jsonl" in where


# --------------------------------------------------------------------------------------------
# The reference archive from a folder someone else wrote (FEDREPRO_ARCHIVE_ROOT)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _gz(text: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as g:
        g.write(text)
    return buf.getvalue()


def _line_with(entry: dict, **files: str) -> bytes:
    """The archive line of ``entry`` with ``files`` replaced, its summary's record rewritten to match."""
    e = json.loads(json.dumps(entry))
    e["files"].update(files)
    summary = json.loads(e["files"]["summary.json"])
    for name, text in files.items():
        summary["files_sha256"][name]["sha256"] = _sha(text.encode())
    e["files"]["summary.json"] = json.dumps(summary)
    return _gz((json.dumps(e) + "\n").encode())


def _archive_variants():
    def corrupt_deflate(g):
        return g[:12] + bytes(b ^ 0x55 for b in g[12:40]) + g[40:]

    return {
        "deep_line": {"data": lambda entry, g: _gz(DEEP.encode() + b"\n")},
        "not_utf8": {"data": lambda entry, g: _gz(b"\xff\xfe\n")},
        "bad_deflate": {"data": lambda entry, g: corrupt_deflate(_gz(json.dumps(entry).encode() * 40))},
        "config_a_list": {"data": lambda entry, g: _line_with(entry, **{"config.json": "[]"})},
        "config_too_deep": {"data": lambda entry, g: _line_with(entry, **{"config.json": DEEP})},
        "nul_in_a_name": {"manifest": lambda m: {**m, "files": {"a\x00.jsonl.gz": {"sha256": "0"}}}},
        "claims_a_list": {"manifest": lambda m: {**m, "claims": [1]}},
        "stages_text": {"manifest": lambda m: {**m, "stages": "x"}},
        "source_text": {"manifest": lambda m: {**m, "files": {k: {**v, "source": "ab"}
                                                              for k, v in m["files"].items()}}},
        "manifest_too_deep": {"manifest": lambda m: DEEP},
        "claims_too_deep": {"claims": DEEP.encode()},
        "claim_rows_not_objects": {"claims": b'{"claims": [1, "x"]}'},
    }


@pytest.mark.parametrize("variant", list(_archive_variants()))
def test_a_crafted_reference_archive_is_one_line_naming_its_file(store, tmp_path, monkeypatch, variant):
    runs, done, cut = store
    folder = tmp_path / "archives" / done.profile
    archive.write(folder, "t", [RunResult(runs / done.hash())], {"commit": "x"})
    archive.write_claims(folder, {"nb.json": b'{"claims": []}'})
    manifest = json.loads((folder / archive.MANIFEST).read_text())
    entry = json.loads(gzip.decompress((folder / "t.jsonl.gz").read_bytes()))
    plan = _archive_variants()[variant]
    if "data" in plan:
        data = plan["data"](entry, (folder / "t.jsonl.gz").read_bytes())
        (folder / "t.jsonl.gz").write_bytes(data)
        manifest["files"]["t.jsonl.gz"]["sha256"] = _sha(data)
    if "claims" in plan:
        (folder / "claims" / "nb.json").write_bytes(plan["claims"])
        manifest["claims"]["nb.json"]["sha256"] = _sha(plan["claims"])
    if "manifest" in plan:
        manifest = plan["manifest"](manifest)
    (folder / archive.MANIFEST).write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    monkeypatch.setenv("FEDREPRO_ARCHIVE", "read")
    monkeypatch.setenv(archive.ENV_ROOT, str(folder.parent))
    archive._LOADED.clear()
    fresh = done.replace(runs_dir=str(tmp_path / "fresh"))
    refused = 0
    for read in (lambda: archive.restore_missing([fresh]), lambda: archive.Archive(folder).claims(),
                 lambda: archive.Archive(folder).stages(), lambda: sample_archive(archive.Archive(folder), 1)):
        try:
            read()
        except CorruptCacheError as e:
            one_line_naming(e, folder)
            refused += 1
    assert refused, "the crafted archive was read as a valid one"


# --------------------------------------------------------------------------------------------
# Flower: the one-command deployment's servers, and a peer's replies


def test_the_flower_deployment_does_not_pass_on_the_legacy_grpc_switches(tmp_path, monkeypatch):
    """With FLWR_INTERNAL_GRPC_CONTROL_API=1 inherited, flower-superlink also serves its Control API on
    0.0.0.0:9093 (anyone who reaches it may submit an app, which is code), and the Fleet API on :9092."""
    pytest.importorskip("flwr")
    from fedrepro.flower.deploy import Deployment

    monkeypatch.setenv("FLWR_INTERNAL_GRPC_CONTROL_API", "1")
    monkeypatch.setenv("FLWR_INTERNAL_GRPC_FLEET_API", "1")
    env = Deployment(num_clients=2, nodes=1, workdir=tmp_path)._env("superlink")
    assert not [k for k in env if k.startswith("FLWR_INTERNAL_GRPC_")]
    assert env["FLWR_HOME"].startswith(str(tmp_path))


@pytest.fixture
def strategy():
    pytest.importorskip("flwr")
    from fedrepro.flower.strategy import MethodStrategy

    s = MethodStrategy.__new__(MethodStrategy)  # only what registering nodes reads
    s.num_clients, s.partition_hash, s.node_of, s.nodes_info = 4, "p", {}, {}
    return s


@pytest.mark.parametrize("clients", ["[[1]]", "[9]", "[-1]", "[1, 1]", '["0"]', "{}", "[", DEEP, None],
                         ids=["nested", "out_of_range", "negative", "twice", "text", "object", "torn", "deep", "none"])
def test_a_nodes_hello_that_is_not_a_nodes_is_one_line(strategy, clients):
    from flwr.app import ConfigRecord

    info = {"partition_hash": "p", "device": "cpu", "host": "h"}
    if clients is not None:
        info["clients"] = clients
    with pytest.raises(FederationError) as err:
        strategy._register(3, ConfigRecord(info))
    one_line_naming(err.value, "SuperNode 3")
    assert strategy.node_of == {}
    strategy._register(3, ConfigRecord({**info, "clients": "[0, 2]"}))
    assert strategy.node_of == {0: 3, 2: 3}


@pytest.mark.parametrize("record", [None, {}, {"num_samples": -1}, {"num_samples": float("inf")},
                                    {"num_samples": [1]}])
def test_a_nodes_reply_without_its_metrics_is_one_line(strategy, record):
    from flwr.app import MetricRecord, RecordDict

    content = RecordDict()
    if record is not None:
        content["metrics.0"] = MetricRecord(record)
    with pytest.raises(FederationError) as err:
        strategy._metrics(3, content, "metrics.0", ("num_samples",))
    one_line_naming(err.value, "SuperNode 3")



# --------------------------------------------------------------------------------------------
# fedrepro reproduce: what it writes under the output root


def test_a_render_log_or_executed_copy_planted_as_a_link_is_not_written_through(tmp_path, monkeypatch):
    from fedrepro.app import reproduce

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    log, target = trace_dir / "nb.ipynb.log", tmp_path / "executed.ipynb"
    os.symlink(victim, log)
    os.symlink(victim, target)

    real = subprocess.run

    def papermill(argv, *args, **kwargs):  # what the render writes to its log, without a kernel
        if "papermill" not in argv:
            return real(argv, *args, **kwargs)
        kwargs["stdout"].write("rendered\n")
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", papermill)
    reproduce._render(tmp_path / "nb.ipynb", target, "smoke", "python3", trace_dir / "nb.ipynb.jsonl", log)
    assert victim.read_text() == "precious\n"
    assert not log.is_symlink() and log.read_text() == "rendered\n" and not target.is_symlink()
