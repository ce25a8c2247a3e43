"""The partition schemes (fedrepro.data.partition): cover, disjointness, counts, determinism, held-out
clients, speed, and errors that name the parameter."""
from __future__ import annotations

import time
import warnings

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from support import domain_data  # noqa: E402

from fedrepro.data.partition import (  # noqa: E402
    PARTITIONERS,
    Partition,
    list_partitions,
    make_partition,
)
from fedrepro.data.partition_plot import (  # noqa: E402
    partition_stats,
)
from fedrepro.errors import ConfigError, CorruptCacheError, PartitionError  # noqa: E402

PROPS = settings(max_examples=30, deadline=None)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def labels(n: int, c: int, seed: int) -> np.ndarray:
    return np.random.default_rng(10_000 + seed).integers(0, c, n)


@st.composite
def problems(draw, max_clients: int = 12):
    """Random (train_labels, test_labels, num_clients, seed), possibly with missing classes."""
    c = draw(st.integers(2, 8))
    n_clients = draw(st.integers(1, max_clients))
    n_train = draw(st.integers(n_clients * 12, n_clients * 40))
    n_test = draw(st.integers(0, 200))
    seed = draw(st.integers(0, 2**31 - 1))
    g = np.random.default_rng(seed)
    # Non-uniform class frequencies (some classes possibly absent) exercise the edge cases.
    freq = g.dirichlet(np.ones(c) * draw(st.sampled_from([0.3, 1.0, 100.0])))
    y_tr = g.choice(c, size=n_train, p=freq)
    y_te = g.choice(c, size=n_test, p=freq)
    return y_tr, y_te, n_clients, seed


def assert_exact_cover(arrays, n: int) -> None:
    allidx = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    assert allidx.size == n
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))


def assert_disjoint(arrays, n: int) -> None:
    allidx = np.concatenate(arrays)
    assert np.unique(allidx).size == allidx.size
    assert allidx.size == 0 or (allidx.min() >= 0 and allidx.max() < n)


def assert_sorted_int64(part: Partition) -> None:
    for a in (*part.train, *part.test):
        assert a.dtype == np.int64
        assert np.all(np.diff(a) > 0)


# ------------------------------------------------------------------------------------------
# Coverage, disjointness, non-empty clients
# ------------------------------------------------------------------------------------------
@PROPS
@given(problems())
def test_iid_covers_every_index_once(problem):
    y_tr, y_te, n, seed = problem
    p = make_partition("iid", y_tr, y_te, n, rng(seed))
    assert_exact_cover(p.train, y_tr.size)
    assert_exact_cover(p.test, y_te.size)
    sizes = [a.size for a in p.train]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) > 0
    assert_sorted_int64(p)


@PROPS
@given(problems(), st.sampled_from([0.1, 0.5, 1.0, 10.0]), st.integers(1, 10))
def test_dirichlet_cover_min_size_and_test_policy(problem, alpha, min_size):
    y_tr, y_te, n, seed = problem
    try:
        p = make_partition("dirichlet", y_tr, y_te, n, rng(seed), alpha=alpha,
                           min_size=min_size, max_retries=200)
    except PartitionError as e:  # the only allowed failure: bounded retries, clearly reported
        assert "max_retries" in str(e) and "min_size" in str(e)
        return
    assert_exact_cover(p.train, y_tr.size)
    assert min(a.size for a in p.train) >= min_size
    assert_sorted_int64(p)
    tr_c, te_c = p.counts(y_tr, y_te)
    # Test: disjoint, class support within the train support, and every test index of a
    # class present in train is used exactly once.
    assert_disjoint(p.test, y_te.size)
    assert np.all((te_c > 0) <= (tr_c > 0))
    in_train = np.isin(y_te, np.flatnonzero(np.bincount(y_tr, minlength=p.num_classes)))
    np.testing.assert_array_equal(np.sort(np.concatenate(p.test)), np.flatnonzero(in_train))


@PROPS
@given(problems(), st.integers(1, 4))
def test_pathological_exactly_k_classes(problem, k):
    y_tr, y_te, n, seed = problem
    present = np.unique(y_tr).size
    try:
        p = make_partition("pathological", y_tr, y_te, n, rng(seed), classes_per_client=k)
    except PartitionError as e:
        # Allowed only when k exceeds the classes present or a class is too small to share.
        assert "classes_per_client" in str(e)
        assert k > present or "clients hold it" in str(e)
        return
    tr_c, te_c = p.counts(y_tr, y_te)
    assert np.all((tr_c > 0).sum(axis=1) == k)
    assert_disjoint(p.train, y_tr.size)
    assert_disjoint(p.test, y_te.size)
    assert np.all((te_c > 0) <= (tr_c > 0))
    # Each used class is fully distributed, and usage is balanced (differs by at most 1).
    used = np.zeros(p.num_classes, dtype=int)
    for s in p.meta["client_classes"]:
        used[s] += 1
    assert used[np.unique(y_tr)].max() - used[np.unique(y_tr)].min() <= 1
    assert tr_c.sum() == np.bincount(y_tr, minlength=p.num_classes)[used > 0].sum()


def test_pathological_cover_when_all_classes_used():
    y_tr, y_te = labels(2000, 10, 0), labels(500, 10, 1)
    p = make_partition("pathological", y_tr, y_te, 20, rng(3), classes_per_client=3)
    assert_exact_cover(p.train, y_tr.size)
    assert_exact_cover(p.test, y_te.size)


def test_pathological_disjoint_blocks_and_shots():
    """FedOTP few-shot: N·k == C gives disjoint classes; shots caps train, test keeps all."""
    y_tr, y_te = labels(3000, 10, 0), labels(1000, 10, 1)
    p = make_partition("pathological", y_tr, y_te, 5, rng(0), classes_per_client=2, shots=4)
    tr_c, te_c = p.counts(y_tr, y_te)
    assert np.all(tr_c[tr_c > 0] == 4)
    assert np.all((tr_c > 0).sum(axis=0) == 1)  # each class held by exactly one client
    assert_exact_cover(p.test, y_te.size)


@PROPS
@given(problems(max_clients=6), st.sampled_from([0.1, 1.0, 100.0]), st.booleans())
def test_fixed_dirichlet_exact_counts_and_disjoint(problem, alpha, pathological):
    y_tr, y_te, n, seed = problem
    per_train = y_tr.size // n // 2
    per_test = y_te.size // n // 4
    params = {"classes_per_client": 2} if pathological else {"alpha": alpha}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = make_partition("fixed_dirichlet", y_tr, y_te, n, rng(seed),
                               train_per_client=per_train, test_per_client=per_test, **params)
    except PartitionError as e:
        assert pathological and "classes_per_client" in str(e)
        return
    assert all(a.size == per_train for a in p.train)
    assert_disjoint(p.train, y_tr.size)
    assert_disjoint(p.test, y_te.size)
    tr_c, te_c = p.counts(y_tr, y_te)
    assert np.all((te_c > 0) <= (tr_c > 0))
    shortfall = np.array(p.meta["test_shortfall"])
    np.testing.assert_array_equal([a.size for a in p.test], per_test - shortfall)
    if pathological:
        assert np.all((tr_c > 0).sum(axis=1) == 2)
        assert np.all(np.abs(tr_c[tr_c > 0] - per_train / 2) <= 0.5)


def test_fixed_dirichlet_fedpft_protocol_cifar_like():
    """FedPFT (ICLR) §4.1: 40 clients × 500 train / 100 test, train/test distributions match."""
    y_tr, y_te = np.repeat(np.arange(10), 5000), np.repeat(np.arange(10), 1000)
    for alpha in (0.1, 0.5, 1.0):
        p = make_partition("fixed_dirichlet", y_tr, y_te, 40, rng(1), alpha=alpha)
        assert [a.size for a in p.train] == [500] * 40
        assert [a.size for a in p.test] == [100] * 40
        tr_c, te_c = p.counts(y_tr, y_te)
        assert np.abs(tr_c / 500 - te_c / 100).max() <= 0.011  # rounding only
    # Pathological variant: 12.5 per class must round to exact totals (Tiny-ImageNet case).
    y_tr200, y_te200 = np.repeat(np.arange(200), 500), np.repeat(np.arange(200), 50)
    p = make_partition("fixed_dirichlet", y_tr200, y_te200, 40, rng(2), classes_per_client=40,
                       test_per_client=200)
    tr_c, _ = p.counts(y_tr200)
    assert [a.size for a in p.train] == [500] * 40
    assert set(np.unique(tr_c[tr_c > 0])) <= {12, 13}


def test_a_per_client_count_past_64_bits_or_an_alpha_past_float32_is_refused_by_name():
    y_tr, y_te = np.repeat(np.arange(10), 50), np.repeat(np.arange(10), 10)
    for key in ("train_per_client", "test_per_client"):
        with pytest.raises(ValueError, match=f"invalid {key}=.*64 bits"):
            make_partition("fixed_dirichlet", y_tr, y_te, 4, rng(0), alpha=0.5, **{key: 2 ** 63})
    with pytest.raises(ValueError, match="invalid alpha=.*float32"):
        make_partition("fixed_dirichlet", y_tr, y_te, 4, rng(0), alpha=1e300)


def test_fixed_dirichlet_test_shortfall_keeps_support_and_warns():
    """A test pool too small for a concentrated client: fewer test samples, never new classes."""
    y_tr, y_te = np.repeat(np.arange(10), 500), np.repeat(np.arange(10), 6)
    with pytest.warns(UserWarning, match="test_per_client"):
        p = make_partition("fixed_dirichlet", y_tr, y_te, 4, rng(0), alpha=0.01,
                           train_per_client=200, test_per_client=15)
    tr_c, te_c = p.counts(y_tr, y_te)
    assert sum(p.meta["test_shortfall"]) > 0
    assert np.all((te_c > 0) <= (tr_c > 0))
    assert_disjoint(p.test, y_te.size)


def test_dirichlet_test_proportions_close():
    y_tr, y_te = np.repeat(np.arange(10), 5000), np.repeat(np.arange(10), 1000)
    p = make_partition("dirichlet", y_tr, y_te, 20, rng(4), alpha=0.5)
    tr_c, te_c = p.counts(y_tr, y_te)
    # Per client, each class's test count is its train share of that class ± 1 sample.
    assert np.abs(te_c - tr_c * 1000 / 5000).max() <= 1.0


# ------------------------------------------------------------------------------------------
# Reproducibility
# ------------------------------------------------------------------------------------------
SCHEMES_SIMPLE = [
    ("iid", {}),
    ("dirichlet", {"alpha": 0.5}),
    ("pathological", {"classes_per_client": 2}),
    ("fixed_dirichlet", {"alpha": 0.5, "train_per_client": 50, "test_per_client": 10}),
]


@PROPS
@given(st.sampled_from(SCHEMES_SIMPLE), st.integers(0, 2**32 - 1))
def test_same_seed_same_partition_different_seed_differs(scheme_params, seed):
    scheme, params = scheme_params
    y_tr, y_te = labels(1000, 10, 0), labels(300, 10, 1)
    a = make_partition(scheme, y_tr, y_te, 10, rng(seed), **params)
    b = make_partition(scheme, y_tr, y_te, 10, rng(seed), **params)
    c = make_partition(scheme, y_tr, y_te, 10, rng(seed + 1), **params)
    assert a == b and a.hash() == b.hash()
    assert c.hash() != a.hash()  # collisions among 1000-sample shuffles are negligible


def test_hash_is_stable_value_and_format():
    y_tr, y_te = labels(1000, 10, 0), labels(300, 10, 1)
    p = make_partition("iid", y_tr, y_te, 4, rng(0))
    h = p.hash()
    assert len(h) == 16 and int(h, 16) >= 0
    # Recomputing from copies (different memory/dtype) gives the same hash.
    q = Partition(train=[a.astype(np.int32) for a in p.train], test=list(p.test),
                  num_classes=p.num_classes)
    assert q.hash() == h
    # Held-out and num_classes are part of the content.
    assert Partition(p.train, p.test, p.num_classes, held_out=(1,)).hash() != h
    assert Partition(p.train, p.test, p.num_classes + 1).hash() != h


def test_partition_arrays_are_read_only():
    p = make_partition("iid", labels(100, 3, 0), labels(10, 3, 1), 2, rng(0))
    with pytest.raises(ValueError):
        p.train[0][0] = 5


# ------------------------------------------------------------------------------------------
# Alpha behaviour
# ------------------------------------------------------------------------------------------
def test_alpha_controls_skew():
    y_tr, y_te = labels(20_000, 10, 0), labels(2000, 10, 1)

    def mean_dominant(alpha: float, scheme: str, **kw) -> tuple[float, float]:
        dom, ncls = [], []
        for seed in range(3):
            p = make_partition(scheme, y_tr, y_te, 20, rng(seed), alpha=alpha, **kw)
            s = partition_stats(p, y_tr)
            dom.append(s.dominant_class_share.mean())
            ncls.append(s.n_classes.mean())
        return float(np.mean(dom)), float(np.mean(ncls))

    for scheme, kw in (("dirichlet", {"min_size": 1}),
                       ("fixed_dirichlet", {"train_per_client": 500, "test_per_client": 50})):
        d_low, c_low = mean_dominant(0.05, scheme, **kw)
        d_mid, _ = mean_dominant(1.0, scheme, **kw)
        d_high, c_high = mean_dominant(100.0, scheme, **kw)
        assert d_low > d_mid > d_high, scheme
        assert d_low > 0.6 and d_high < 0.2, scheme
        assert c_low < 5 and c_high >= 9.5, scheme


def test_tiny_alpha_gives_no_nan():
    y_tr, y_te = labels(5000, 10, 0), labels(500, 10, 1)
    p = make_partition("dirichlet", y_tr, y_te, 10, rng(0), alpha=1e-4, min_size=0)
    assert_exact_cover(p.train, y_tr.size)
    tr_c, _ = p.counts(y_tr)
    assert np.all((tr_c > 0).sum(axis=0) == 1)  # each class to essentially one client


def test_dirichlet_balance_variant():
    y_tr, y_te = labels(10_000, 10, 0), labels(1000, 10, 1)
    p = make_partition("dirichlet", y_tr, y_te, 10, rng(0), alpha=0.5, balance=True)
    assert_exact_cover(p.train, y_tr.size)
    assert p.meta["params"]["balance"] is True


# ------------------------------------------------------------------------------------------
# Domains
# ------------------------------------------------------------------------------------------
def test_domain_one_client_per_domain():
    y_tr, y_te, d_tr, d_te = domain_data()
    p = make_partition("domain", y_tr, y_te, 3, rng(0), train_domains=d_tr, test_domains=d_te)
    for k in range(3):
        assert np.all(d_tr[p.train[k]] == k) and np.all(d_te[p.test[k]] == k)
    assert_exact_cover(p.train, y_tr.size)
    assert p.meta["client_domain"] == [0, 1, 2]
    q = make_partition("domain", y_tr, y_te, 3, rng(0), train_domains=d_tr, test_domains=d_te,
                       train_per_client=100, test_per_client=50)
    assert [a.size for a in q.train] == [100] * 3 and [a.size for a in q.test] == [50] * 3
    assert all(np.all(d_tr[q.train[k]] == k) for k in range(3))


@pytest.mark.parametrize("alpha", [0.1, 1.0, None, float("inf")])
def test_domain_dirichlet_clients_stay_in_domain(alpha):
    y_tr, y_te, d_tr, d_te = domain_data()
    p = make_partition("domain_dirichlet", y_tr, y_te, 12, rng(0), train_domains=d_tr,
                       test_domains=d_te, clients_per_domain=4, alpha=alpha)
    assert p.meta["client_domain"] == [d for d in range(3) for _ in range(4)]
    for k, d in enumerate(p.meta["client_domain"]):
        assert p.train[k].size >= 2
        assert np.all(d_tr[p.train[k]] == d) and np.all(d_te[p.test[k]] == d)
    assert_exact_cover(p.train, y_tr.size)
    assert_disjoint(p.test, y_te.size)
    if alpha is None or alpha == float("inf"):
        assert p.meta["params"]["label_skew"] is False
        assert_exact_cover(p.test, y_te.size)


def test_domain_dirichlet_label_skew_flag():
    y_tr, y_te, d_tr, d_te = domain_data()
    p = make_partition("domain_dirichlet", y_tr, y_te, 6, rng(0), train_domains=d_tr,
                       test_domains=d_te, clients_per_domain=2, alpha=0.1, label_skew=False)
    sizes = [a.size for a in p.train]
    assert max(sizes) - min(sizes) <= 1


# ------------------------------------------------------------------------------------------
# Held-out clients
# ------------------------------------------------------------------------------------------
def test_held_out_deterministic_and_excluded():
    y_tr, y_te = labels(2000, 10, 0), labels(400, 10, 1)
    a = make_partition("dirichlet", y_tr, y_te, 20, rng(5), alpha=0.5, holdout_clients=2)
    b = make_partition("dirichlet", y_tr, y_te, 20, rng(5), alpha=0.5, holdout_clients=2)
    plain = make_partition("dirichlet", y_tr, y_te, 20, rng(5), alpha=0.5)
    assert a.held_out == b.held_out and len(a.held_out) == 2
    assert set(a.participating) == set(range(20)) - set(a.held_out)
    assert len(a.participating) == 18
    # Held-out clients keep their data, and picking them does not change the index arrays.
    assert all(a.train[k].size > 0 for k in a.held_out)
    assert all(np.array_equal(x, y) for x, y in zip(a.train, plain.train))
    assert a.hash() != plain.hash()


def test_held_out_by_domain():
    y_tr, y_te, d_tr, d_te = domain_data()
    p = make_partition("domain_dirichlet", y_tr, y_te, 12, rng(0), train_domains=d_tr,
                       test_domains=d_te, clients_per_domain=4, alpha=None,
                       holdout_clients=3, holdout_by_domain=True)
    assert sorted(p.meta["client_domain"][k] for k in p.held_out) == [0, 1, 2]


@pytest.mark.parametrize("h", [-1, 10, 11])
def test_held_out_range(h):
    with pytest.raises(PartitionError, match="holdout_clients"):
        make_partition("iid", labels(100, 3, 0), labels(10, 3, 1), 10, rng(0),
                       holdout_clients=h)


# ------------------------------------------------------------------------------------------
# Persistence
# ------------------------------------------------------------------------------------------
def test_npz_round_trip(tmp_path):
    y_tr, y_te = labels(1000, 10, 0), labels(300, 10, 1)
    p = make_partition("dirichlet", y_tr, y_te, 8, rng(0), alpha=0.3, holdout_clients=1)
    path = p.to_npz(tmp_path / "sub" / "part.npz")
    q = Partition.from_npz(path)
    assert q == p and q.hash() == p.hash()
    assert q.held_out == p.held_out and q.meta["scheme"] == "dirichlet"
    assert not list(path.parent.glob(".*tmp"))  # no temp files left behind


def test_npz_corrupt_raises(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CorruptCacheError):
        Partition.from_npz(bad)


# ------------------------------------------------------------------------------------------
# Bounded retries and bad input
# ------------------------------------------------------------------------------------------
def test_impossible_dirichlet_fails_fast():
    y_tr, y_te = labels(60, 10, 0), labels(20, 10, 1)
    # CPU time of this process, not wall time: a busy machine's other work must not fail the test.
    t = time.process_time()
    with pytest.raises(PartitionError, match="min_size"):
        make_partition("dirichlet", y_tr, y_te, 50, rng(0), alpha=0.5, min_size=10)
    # Feasible on paper but practically never satisfied: the retry budget must end it.
    y_tr = labels(200, 10, 0)
    with pytest.raises(PartitionError, match="max_retries=50"):
        make_partition("dirichlet", y_tr, y_te, 10, rng(0), alpha=0.01, min_size=19,
                       max_retries=50)
    assert time.process_time() - t < 2.0


def test_dirichlet_60k_100_clients_is_fast():
    y_tr, y_te = labels(60_000, 10, 0), labels(10_000, 10, 1)
    t = time.process_time()  # CPU time: see test_impossible_dirichlet_fails_fast
    p = make_partition("dirichlet", y_tr, y_te, 100, rng(0), alpha=0.1)
    assert time.process_time() - t < 1.0
    assert_exact_cover(p.train, y_tr.size)


Y, YT = labels(200, 5, 0), labels(50, 5, 1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scheme="dirichlet", alpha=0.0), "alpha"),
        (dict(scheme="dirichlet", alpha=-1.0), "alpha"),
        (dict(scheme="dirichlet", alpha=float("nan")), "alpha"),
        (dict(scheme="domain_dirichlet", alpha=-0.5, clients_per_domain=1), "alpha"),
        (dict(scheme="iid", num_clients=201), "num_clients"),
        (dict(scheme="iid", num_clients=0), "num_clients"),
        (dict(scheme="pathological", classes_per_client=6), r"classes_per_client=6; valid: an integer in \[1, 5\]"),
        (dict(scheme="pathological", classes_per_client=0), "classes_per_client"),
        (dict(scheme="domain"), "train_domains"),
        (dict(scheme="domain_dirichlet", alpha=0.5, clients_per_domain=2), "train_domains"),
        (dict(scheme="iid", train_labels=np.array([0, 1, -1, 2] * 10)), "train_labels"),
        (dict(scheme="iid", test_labels=np.array([0, 7]), num_classes=5), "test_labels"),
        (dict(scheme="iid", num_classes=3), "num_classes"),
        (dict(scheme="fixed_dirichlet", alpha=0.5, train_per_client=100), "train_per_client"),
        (dict(scheme="fixed_dirichlet", alpha=0.5, train_per_client=10, test_per_client=20),
         "test_per_client"),
        (dict(scheme="dirichlet", alpha=0.5, max_retries=0), "max_retries"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, match):
    kw = dict(train_labels=Y, test_labels=YT, num_clients=4, rng=rng(0))
    kw.update(kwargs)
    scheme = kw.pop("scheme")
    with pytest.raises(PartitionError, match=match):
        make_partition(scheme, **kw)


def test_domain_client_count_must_match():
    y_tr, y_te, d_tr, d_te = domain_data()
    with pytest.raises(PartitionError, match="num_clients"):
        make_partition("domain", y_tr, y_te, 4, rng(0), train_domains=d_tr, test_domains=d_te)
    with pytest.raises(PartitionError, match="clients_per_domain"):
        make_partition("domain_dirichlet", y_tr, y_te, 10, rng(0), train_domains=d_tr,
                       test_domains=d_te, clients_per_domain=4, alpha=0.5)


def test_unknown_scheme_and_params():
    with pytest.raises(ConfigError, match="dirichlet.*iid"):
        make_partition("nope", Y, YT, 4, rng(0))
    with pytest.raises(ConfigError, match="betta.*valid parameters: alpha"):
        make_partition("dirichlet", Y, YT, 4, rng(0), alpha=0.5, betta=2)
    with pytest.raises(ConfigError, match="alpha"):
        make_partition("dirichlet", Y, YT, 4, rng(0))  # required parameter missing
    with pytest.raises(ConfigError, match="rng"):
        make_partition("iid", Y, YT, 4, 0)  # a seed is not a Generator


def test_registry_lists_all_schemes():
    expected = {"iid", "dirichlet", "pathological", "fixed_dirichlet", "domain",
                "domain_dirichlet"}
    assert expected <= set(list_partitions()) == set(PARTITIONERS.names())


def test_no_global_random_state_used():
    """Module-level np.random state must neither influence nor be consumed by partitioning."""
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = make_partition("dirichlet", Y, YT, 4, rng(0), alpha=0.5, min_size=1)
    np.random.seed(999)
    b = make_partition("dirichlet", Y, YT, 4, rng(0), alpha=0.5, min_size=1)
    assert a == b
    np.random.seed(123)
    assert np.array_equal(np.random.get_state()[1], before)
