"""The paper profile's datasets per table (issue 15): each table runs every dataset column its paper
prints, labelled as the paper labels it, with the paper's model and client counts; the smoke and
laptop profiles run the table's own setup alone. Configs only: nothing is loaded or trained."""
from __future__ import annotations

import pandas as pd
import pytest

from fedrepro.claims.core import Claim, compare
from fedrepro.papers.verdicts import registered
from fedrepro.papers import paper, setup
from fedrepro.papers.tables import PAPER_COLUMN, TableDef

A = "data.partition_args.alpha"
C10, C100, TINY = ("cifar10", "resnet8", 40), ("cifar100", "resnet10", 40), ("tiny_imagenet", "resnet10", 40)
CNN10, R18_C100, R18_TINY = ("cifar10", "moon_cnn", 10), ("cifar100", "resnet18", 10), ("tiny_imagenet", "resnet18", 10)

# Table -> its paper columns at the paper profile: (dataset, model, clients).
EXPECTED = {
    ("fedpft", "linear_probe"): {"C10": C10, "C100": C100},             # ICLR Table 5
    ("fedpft", "prompt_effect"): {"C10": C10, "C100": C100},            # ICLR Table 6
    ("fedpft", "linear"): {"C10": C10, "C100": C100},                   # ICLR Table 9
    ("fedpft", "partial_participation"): {"CIFAR-10": C10, "CIFAR-100": C100, "Tiny": TINY},  # ICLR Table 13
    ("fedpft", "n_kappa"): {"C10": C10, "C100": C100},                  # ICLR Fig. 11
    ("fedpft", "r_f"): {"C10": C10, "C100": C100, "Tiny": TINY},        # ICLR Fig. 12
    ("fedpft", "n_rho"): {"C10": C10, "C100": C100},                    # arXiv Fig. 8
    ("fedpft", "pathological"): {"CIFAR-10": C10, "CIFAR-100": C100, "Tiny-ImageNet": TINY},  # ICLR Table 7
    ("fedpft", "feature_shift"): {"PACS": ("pacs", "resnet10", 4), "DomainNet": ("domainnet", "resnet10", 6)},
    ("pfedcspc", "ablation_global"): {"C10 C=1.0": CNN10, "C10 C=0.5": CNN10, "C100 C=1.0": R18_C100,
                                      "C100 C=0.5": R18_C100},          # Table IV
    ("pfedcspc", "ablation_personal"): {"CIFAR10": CNN10, "CIFAR100": R18_C100},      # Table V
    ("pfedcspc", "orthogonality"): {"CIFAR10": CNN10, "TinyImagenet": R18_TINY},      # Table VI
    ("pfedcspc", "rounds_default"): {"C10 β=0.5": CNN10, "Tiny β=0.5": R18_TINY},     # Table VII
    ("pfedcspc", "rounds_beta0.1"): {"C10 β=0.1": CNN10, "Tiny β=0.1": R18_TINY},
}


def _table(name: tuple[str, str]) -> TableDef:
    return paper(name[0]).TABLES[name[1]]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_paper_profile_runs_every_dataset_column_of_the_table(name):
    by_column = _table(name).configs_by_column("paper")
    assert list(by_column) == list(EXPECTED[name])
    for label, configs in by_column.items():
        got = {(c.data.dataset, c.model.name, c.data.num_clients) for c in configs}
        assert got == {EXPECTED[name][label]}, label
    # One parameter: configs() is every column's runs, in order.
    assert [c.hash() for c in _table(name).configs("paper", tuned=False)] == \
        [c.hash() for cs in by_column.values() for c in cs]


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("profile", ["smoke", "laptop"])
def test_smoke_and_laptop_run_the_tables_own_setup_alone(name, profile):
    table = _table(name)
    assert list(table.configs_by_column(profile)) == [None]
    assert table.configs_by_column(profile)[None] == table.configs(profile, tuned=False)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if _table(n).reference is not None))
def test_each_column_label_is_one_the_paper_prints(name):
    table = _table(name)
    ref = table.paper_numbers()
    for label, configs in table.configs_by_column("paper").items():
        if table.columns is None:
            wanted = {label}
        else:
            wanted = {table.column_label(_value(c, table.columns), label) for c in configs}
        if name == ("fedpft", "feature_shift"):  # Table 10 splits each dataset into Origin and Match
            wanted = {f"{label} Origin", f"{label} Match"}
        assert wanted <= set(ref.columns), (label, wanted, list(ref.columns))


def _value(cfg, dotted: str):
    obj = cfg
    for part in dotted.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def test_fedpft_pathological_gives_each_dataset_its_classes_and_tiny_clients_200_test_images():
    import numpy as np

    from fedrepro.data.partition import PARTITIONERS

    # ICLR App. D.1: 2, 20 and 40 classes per client; §4.1: 500 training images per client, 100
    # test images (200 on Tiny-ImageNet). Partitioned here on labels shaped as each dataset's
    # (classes × images a class), as the run subsamples them: no images are loaded.
    want = {"CIFAR-10": (2, 100), "CIFAR-100": (20, 100), "Tiny-ImageNet": (40, 200)}
    shape = {"CIFAR-10": (10, 5000, 1000), "CIFAR-100": (100, 500, 100), "Tiny-ImageNet": (200, 500, 50)}
    for label, configs in _table(("fedpft", "pathological")).configs_by_column("paper").items():
        d = configs[0].data
        assert {repr(c.data) for c in configs} == {repr(d)}  # one split per column
        classes, n_train, n_test = shape[label]
        y_tr, y_te = np.repeat(np.arange(classes), n_train), np.repeat(np.arange(classes), n_test)
        if d.max_train is not None:  # the subsample the run takes first (stratified: equal per class)
            y_tr = np.repeat(np.arange(classes), d.max_train // classes)
            y_te = np.repeat(np.arange(classes), d.max_test // classes)
        part = PARTITIONERS.get(d.partition)(y_tr, y_te, d.num_clients, np.random.default_rng(0), **d.partition_args)
        k, test = want[label]
        assert {len(ix) for ix in part.train} == {500} and {len(ix) for ix in part.test} == {test}, label
        assert {len(np.unique(y_tr[ix])) for ix in part.train} == {k}, label


def test_fedpft_feature_shift_gives_each_domain_1000_and_500_images():
    # ICLR App. I: one client per domain (PACS 4, DomainNet 6), 1000 training and 500 test images each.
    for configs in _table(("fedpft", "feature_shift")).configs_by_column("paper").values():
        for c in configs:
            assert c.data.partition == "domain"
            assert (c.data.partition_args["train_per_client"], c.data.partition_args["test_per_client"]) == (1000, 500)


def test_fedpft_ablation_and_time_run_on_cifar100_resnet10():
    # ICLR Table 4 (on CIFAR-100) and App. M (Table 14: CIFAR-100, ResNet-10, 100 rounds).
    for name in ("ablation", "time"):
        configs = paper("fedpft").TABLES[name].configs("paper", tuned=False)
        assert {(c.data.dataset, c.model.name, c.data.num_clients) for c in configs} == {C100}, name
    assert {c.train.rounds for c in paper("fedpft").TABLES["time"].configs("paper")} == {100}


def test_pfedcspc_table_iv_runs_half_the_clients_in_its_c_half_columns():
    for label, configs in _table(("pfedcspc", "ablation_global")).configs_by_column("paper").items():
        assert {c.train.participation for c in configs} == {0.5 if label.endswith("C=0.5") else 1.0}, label


@pytest.mark.parametrize("name, beta", [(("pfedcspc", "rounds_default"), 0.5), (("pfedcspc", "rounds_beta0.1"), 0.1)])
def test_pfedcspc_table_vii_tiny_runs_enough_rounds_to_reach_its_targets(name, beta):
    from fedrepro.papers.reference import paper_table

    needed = int(paper_table("pfedcspc", "T7")[f"Tiny β={beta}"].max())   # FedAvg: 89 / 85 rounds
    by_column = _table(name).configs_by_column("paper")
    for label, configs in by_column.items():
        assert {c.data.partition_args["alpha"] for c in configs} == {beta}, label
    tiny = by_column[f"Tiny β={beta}"]
    assert min(c.train.rounds for c in tiny) >= needed
    # MOON's μ on Tiny-ImageNet is its CIFAR-100 one (MOON, CVPR 2021, §4.1).
    assert {c.method.args["mu"] for c in tiny if c.method.name == "moon"} == {1.0}


def test_pfedcspc_table_vi_gives_moon_its_tiny_imagenet_mu():
    by_column = _table(("pfedcspc", "orthogonality")).configs_by_column("paper")
    mu = {label: {c.method.args.get("mu", c.method.args.get("moon_mu")) for c in cs if "moon" in
                  (c.method.name, c.method.args.get("base"))} for label, cs in by_column.items()}
    assert mu == {"CIFAR10": {5.0}, "TinyImagenet": {1.0}}


@pytest.mark.parametrize("variant, stand_in", [("pathological_cifar100", "pathological"),
                                               ("pathological_tiny_imagenet", "pathological"),
                                               ("feature_shift_pacs", "feature_shift")])
@pytest.mark.parametrize("profile", ["smoke", "laptop"])
def test_fedpft_paper_only_variants_are_their_stand_in_below_the_paper_profile(variant, stand_in, profile):
    assert setup("fedpft", profile, variant).hash() == setup("fedpft", profile, stand_in).hash()


def _fake_results(table: TableDef, profile: str) -> pd.DataFrame:
    """The table's results as ``TableDef.run`` hands them on: its own ``derive`` applied (the linear
    table labels FedAvg+Linear's rows by schedule)."""
    rows = []
    for label, configs in table.configs_by_column(profile).items():
        for c in configs:
            rows.append({"method.name": c.method.name, A: c.data.partition_args.get("alpha"), "seed": c.seed,
                         "best": 0.5 + 0.01 * c.seed, **({} if label is None else {PAPER_COLUMN: label}),
                         **{f"method.args.{k}": v for k, v in c.method.args.items()}})
    results = pd.DataFrame(rows)
    return table.derive(results) if table.derive is not None else results


def test_show_puts_each_paper_column_of_ours_beside_the_papers():
    table = paper("fedpft").TABLES["linear"]
    shown = table.show(_fake_results(table, "paper"))
    ours, theirs = shown["ours (best round)"], shown["paper"]
    assert list(ours.columns) == [f"{d} α={a}" for d in ("C10", "C100") for a in (0.1, 0.5, 1.0)]
    assert list(ours.columns) == list(theirs.columns)
    assert ours.loc["fedavg", "C100 α=0.5"] == "51.00 ± 1.00"
    # At the laptop profile the one column stands in for the first: labelled as before.
    laptop = table.show(_fake_results(table, "laptop"))["ours (best round)"]
    assert list(laptop.columns) == [f"C10 α={a}" for a in (0.1, 0.5, 1.0)]
    lookup = table.paper_lookup()
    assert lookup("fedavg", 0.1) == theirs.loc["fedavg", "C10 α=0.1"]
    assert lookup("fedavg", 0.1, "C100") == theirs.loc["fedavg", "C100 α=0.1"]


def test_a_table_without_a_column_axis_shows_one_column_per_dataset():
    table = paper("fedpft").TABLES["pathological"]
    shown = table.show(_fake_results(table, "paper"))
    assert list(shown["ours (best round)"].columns) == ["CIFAR-10", "CIFAR-100", "Tiny-ImageNet"]
    assert list(table.first_column(_fake_results(table, "paper"))[PAPER_COLUMN].unique()) == ["CIFAR-10"]


def _claim(columns: tuple[str, ...] = ()) -> Claim:
    return Claim("test.a_beats_b", "test", "nowhere", "a beats b",
                 check=lambda r: compare(r, {"m": "a"}, {"m": "b"}), paper_columns=columns)


def _rows(column: str | None, a: float, b: float) -> list[dict]:
    extra = {} if column is None else {PAPER_COLUMN: column}
    return [{"m": m, "seed": s, "best": v + 0.001 * s, **extra} for m, v in (("a", a), ("b", b)) for s in range(3)]


def test_a_claim_holds_in_each_paper_column_it_names_and_never_mixes_them():
    results = pd.DataFrame(_rows("C10", 0.8, 0.5) + _rows("C100", 0.4, 0.5))
    assert _claim(("C10",)).evaluate(results).verdict == "PASS"
    both = _claim(("C10", "C100")).evaluate(results)
    assert both.verdict == "FAIL" and "[C10]" in both.evidence and "[C100]" in both.evidence
    # A claim naming no paper column does not read them: it is not run on them.
    assert _claim().evaluate(results).verdict == "NOT RUN"
    # Without paper columns (the smoke and laptop runs) every claim reads its rows as before.
    plain = pd.DataFrame(_rows(None, 0.8, 0.5))
    assert _claim(("C10",)).evaluate(plain).verdict == _claim().evaluate(plain).verdict == "PASS"


@pytest.mark.parametrize("claim_id", sorted(c for c in registered().names() if registered().get(c).paper_columns))
def test_a_claims_paper_columns_are_columns_of_its_papers_tables(claim_id):
    claim = registered().get(claim_id)
    labels = {k for t in paper(claim.paper).TABLES.values() for k in (t.datasets or {})}
    assert set(claim.paper_columns) <= labels


def test_a_notebooks_own_steps_keep_the_datasets_apart_and_change_nothing_without_them():
    from fedrepro.papers.tables import by_paper_column, with_paper_column

    tagged = pd.DataFrame(_rows("C10", 0.8, 0.5) + _rows("C100", 0.4, 0.5))
    assert [c for c, _ in by_paper_column(tagged)] == ["C10", "C100"]
    assert with_paper_column(["m"], tagged) == [PAPER_COLUMN, "m"]
    plain = pd.DataFrame(_rows(None, 0.8, 0.5))
    ((column, rows),) = by_paper_column(plain)
    assert column is None and rows is plain
    assert with_paper_column(["m"], plain) == ["m"]
    assert paper("fedpft").TABLES["linear"].first_column(plain) is plain
