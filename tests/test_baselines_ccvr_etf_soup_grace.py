"""CCVR, FedETF, FedSoup and GRACE (pFedCSPC's global-FL baselines, specs/pfedcspc.md §3): each
learns, and each one's characteristic mechanism does what its paper (or, for GRACE's server, its
code) says."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.aggregate import weighted_average
from fedrepro.fl.local import evaluate_model
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods import METHODS
from fedrepro.methods.ccvr import STATS, class_statistics, merge_statistics, sample_virtual
from fedrepro.methods.fedetf import ETF_KEY, balanced_feature_loss, simplex_etf
from fedrepro.methods.fedsoup import PERSONAL, SOUP_N, soup_step
from fedrepro.methods.grace import consistency, coral_loss, cra_weights
from support import PLAIN_STEP as ONE_STEP, first_batch, setup, update

NAMES = ["ccvr", "fedetf", "fedsoup", "grace"]
PLAIN_STEP = {**ONE_STEP, "train.weight_decay": 0.0}




@pytest.mark.parametrize("global_eval", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_learns_on_synthetic(tiny, name, global_eval):
    res = fedrepro.run(tiny(**{"method.name": name, "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": global_eval}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    if global_eval:
        assert res.summary["final_global_acc"] > 0.4, res.summary


@pytest.mark.parametrize("name, args, key", [
    ("ccvr", {"calibrate_every": -1}, "calibrate_every"), ("ccvr", {"num_virtual": 0}, "num_virtual"),
    ("ccvr", {"apply": "always"}, "apply"), ("ccvr", {"calib_lr": 0}, "calib_lr"),
    ("fedetf", {"projection": "mlp"}, "projection"), ("fedetf", {"beta_init": 0}, "beta_init"),
    ("fedetf", {"personalize": "x"}, "personalize"), ("fedetf", {"pers_cycles": -1}, "pers_cycles"),
    ("fedsoup", {"soup_start": 1.5}, "soup_start"), ("fedsoup", {"val_fraction": 0.0}, "val_fraction"),
    ("fedsoup", {"eval_model": "mine"}, "eval_model"),
    ("grace", {"align_type": "mmd"}, "align_type"), ("grace", {"align_weight": -1}, "align_weight"),
    ("grace", {"similarity": "l2"}, "similarity"), ("grace", {"server_lr": 0}, "server_lr"),
])
def test_bad_hyperparameters_name_the_key(name, args, key):
    with pytest.raises(ConfigError, match=f"method.args.{key}"):
        METHODS.get(name).parse_params(args)


# CCVR --------------------------------------------------------------------------------------------

def test_ccvr_merged_statistics_are_the_pooled_ones():
    """Clients' (N, μ, Σ) merged by CCVR's formula = the mean and unbiased covariance of the pooled
    features, class by class (a class with one sample on a client, a class absent on another)."""
    g = torch.Generator().manual_seed(0)
    m, C = 3, 4
    parts = [(torch.randn(9, m, generator=g), torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 3])),
             (torch.randn(5, m, generator=g) + 2.0, torch.tensor([0, 1, 1, 1, 1])),
             (torch.randn(6, m, generator=g) - 1.0, torch.tensor([0, 0, 2, 2, 2, 2]))]
    n, mu, cov = merge_statistics([class_statistics(x, y, C) for x, y in parts], C, m)
    xs = torch.cat([x for x, _ in parts]).double()
    ys = torch.cat([y for _, y in parts])
    for c in range(C):
        z = xs[ys == c]
        assert n[c] == len(z)
        assert torch.allclose(mu[c], z.mean(0))
        expected = torch.cov(z.T) if len(z) > 1 else torch.zeros(m, m, dtype=torch.float64)
        assert torch.allclose(cov[c], expected, atol=1e-10), c
    torch.manual_seed(0)
    feats, labels = sample_virtual(n, mu, cov, 20_000)
    assert torch.bincount(labels).tolist() == [20_000] * C
    assert torch.allclose(feats[labels == 0].mean(0), mu[0], atol=0.05)
    assert torch.allclose(torch.cov(feats[labels == 0].T), cov[0], atol=0.1)
    assert torch.allclose(feats[labels == 3], mu[3].expand(20_000, m))  # one sample: Σ = 0


def test_ccvr_statistics_describe_the_received_model_and_only_its_head_is_calibrated(tiny):
    cfg = tiny(**{"method.name": "ccvr", "method.args": {"num_virtual": 200, "calib_epochs": 2}})
    method, clients, st = setup(cfg)
    assert not any(k.startswith(STATS) for k in update(method, st, clients[0], rnd=0).upload)  # round 0: none
    ups = [update(method, st, c, rnd=1) for c in clients]
    # Statistics are of the features under the *received* model, before local training.
    model = method.load(st.shared, {})
    model.eval()
    with torch.no_grad():
        x, y = first_batch(clients[0])
        classes, counts, means, _ = class_statistics(model.features(x), y, 4)
    assert torch.equal(ups[0].upload[STATS + "classes"], classes)
    assert torch.equal(ups[0].upload[STATS + "count"], counts)
    assert torch.allclose(ups[0].upload[STATS + "mean"], means.float(), atol=1e-6)
    fedavg = weighted_average([{k: u.upload[k] for k in method.shared_keys} for u in ups],
                              [u.num_samples for u in ups])
    torch.manual_seed(5)
    new, server = method.aggregate(st.shared, ups, st.server_state, 1)
    assert set(new) == set(fedavg) and all(torch.equal(new[k], fedavg[k]) for k in new)  # training: FedAvg
    cal = server["calibrated"]
    for k in cal:
        same = torch.equal(cal[k], st.shared[k])
        assert same == (not k.startswith("head.")), k  # φ is the received one; h is re-trained
    g = method.global_model(new, server)
    assert torch.equal(g.head.weight, cal["head.weight"])
    # broadcast: the same calibrated head (same RNG draws) goes out on top of the FedAvg body
    method_b, _, _ = setup(tiny(**{"method.name": "ccvr", "method.args": {"num_virtual": 200, "calib_epochs": 2,
                                                                          "apply": "broadcast"}}))
    torch.manual_seed(5)
    new_b, server_b = method_b.aggregate(st.shared, ups, st.server_state, 1)
    assert "calibrated" not in server_b
    for k in new_b:
        assert torch.allclose(new_b[k], cal[k] if k.startswith("head.") else fedavg[k]), k
    # a round without statistics drops the stale calibrated model
    plain = [update(method, st, c, rnd=1, shared=st.shared) for c in clients]
    plain = [type(u)(upload={k: v for k, v in u.upload.items() if not k.startswith(STATS)}, state=u.state,
                     num_samples=u.num_samples) for u in plain]
    _, server2 = method.aggregate(new, plain, server, 2)
    assert "calibrated" not in server2


def test_ccvr_calibration_unbiases_a_biased_head(tiny):
    """A head that predicts class 0 for everything, re-trained on virtual features of well separated
    class Gaussians, classifies fresh draws from those Gaussians."""
    method, _, st = setup(tiny(**{"method.name": "ccvr", "method.args": {"num_virtual": 300, "calib_epochs": 5}}))
    model = method.load(st.shared, {})
    m, C = model.feature_dim, model.num_classes
    g = torch.Generator().manual_seed(1)
    centres = 3.0 * torch.randn(C, m, generator=g, dtype=torch.float64)
    n = torch.full((C,), 50.0, dtype=torch.float64)
    cov = torch.eye(m, dtype=torch.float64).expand(C, m, m).clone()
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.copy_(torch.tensor([10.0] + [0.0] * (C - 1)))
    torch.manual_seed(0)
    test_x, test_y = sample_virtual(n, centres, cov, 200)
    assert (model.head(test_x.float()).argmax(1) == 0).all()
    feats, labels = sample_virtual(n, centres, cov, method.p.num_virtual)
    head = method.calibrate_head(model, feats, labels)
    model.load_state_dict({**model.state_dict(), **head})
    acc = (model.head(test_x.float()).argmax(1) == test_y).double().mean()
    assert acc > 0.9, acc


# FedETF ------------------------------------------------------------------------------------------

def test_simplex_etf_geometry_and_determinism(tiny):
    etf = simplex_etf(6, 4, torch.Generator().manual_seed(0))
    gram = etf.T @ etf
    assert torch.allclose(gram.diagonal(), torch.ones(4), atol=1e-6)
    off = gram[~torch.eye(4, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -1 / 3), atol=1e-6)
    assert torch.allclose(etf.sum(1), torch.zeros(6), atol=1e-6)  # centred: Σ_c v_c = 0
    with pytest.raises(ValueError):
        simplex_etf(3, 4, torch.Generator().manual_seed(0))
    method, _, _ = setup(tiny(**{"method.name": "fedetf"}))
    a, _ = method.init_server(7)
    b, _ = method.init_server(7)
    c, _ = method.init_server(8)
    assert a[ETF_KEY].shape == (4, 4)  # projection="head": d = C
    assert torch.equal(a[ETF_KEY], b[ETF_KEY]) and not torch.equal(a[ETF_KEY], c[ETF_KEY])


def test_fedetf_logits_loss_and_fixed_classifier(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedetf", "method.args.beta_init": 2.0}))
    net = method.load(st.shared)
    x, y = first_batch(clients[0])
    z = net.features(x)
    proj = F.linear(z, st.shared["head.proj.weight"], st.shared["head.proj.bias"])
    u = proj / proj.norm(dim=1, keepdim=True)
    logits = net(x)
    assert torch.allclose(logits, 2.0 * u @ st.shared[ETF_KEY], atol=1e-5)
    # balanced feature loss: d/dlogits = (softmax(logits + log n_c) − onehot) / B
    counts = torch.bincount(clients[0].train_y, minlength=4)
    out = logits.detach().requires_grad_(True)
    balanced_feature_loss(out, y, counts, 1.0).backward()
    expected = (torch.softmax(out.detach() + counts.double().log().float(), 1) - F.one_hot(y, 4)) / len(y)
    assert torch.allclose(out.grad, expected, atol=1e-6)
    # V is neither trained nor uploaded nor aggregated; β is
    ups = [update(method, st, c) for c in clients]
    assert ETF_KEY not in ups[0].upload and "head.beta" in ups[0].upload
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    assert torch.equal(new[ETF_KEY], st.shared[ETF_KEY])
    assert not torch.equal(new["head.beta"], st.shared["head.beta"])
    assert torch.equal(method.load(new).head.etf, st.shared[ETF_KEY])


def test_fedetf_personalization_adapts_the_etf_and_projection_only(tiny):
    args = {"pers_epochs": 0, "pers_cycles": 2, "pers_cycle_epochs": 1}
    method, clients, st = setup(tiny(**{"method.name": "fedetf", "method.args": args}))
    net = method.load(st.shared)
    method.personalize(net, clients[0], torch_gen(0, "eval", 1, 0))
    sd = net.state_dict()
    for k, v in sd.items():
        moved = not torch.equal(v, st.shared[k])
        assert moved == (k == ETF_KEY or k.startswith("head.proj.")), k
    # evaluate() adapts a throw-away copy: the broadcast model is untouched
    before = {k: v.clone() for k, v in st.shared.items()}
    method.evaluate(st.shared, {}, clients[0], torch_gen(0, "eval", 1, 0))
    assert all(torch.equal(before[k], st.shared[k]) for k in before)


# FedSoup -----------------------------------------------------------------------------------------

def _sd(*values):
    return {"w": torch.tensor(values, dtype=torch.float32), "n": torch.tensor(3)}


def test_soup_step_is_greedy_interpolation():
    theta, g = _sd(4.0, 0.0), _sd(0.0, 4.0)
    # empty soup, candidate better: (θ + g)/2 and the soup becomes {g}
    model, soup, n, ok = soup_step(theta, None, 0, g, lambda sd: float(sd["w"][1]))
    assert ok and n == 1 and torch.equal(model["w"], torch.tensor([2.0, 2.0])) and torch.equal(soup["w"], g["w"])
    assert torch.equal(model["n"], theta["n"])  # integer entries are θ's
    # empty soup, candidate not better (a tie keeps the soup): θ itself
    model, soup, n, ok = soup_step(theta, None, 0, g, lambda sd: 1.0)
    assert not ok and n == 0 and soup is None and torch.equal(model["w"], theta["w"])
    # a soup of two (mean P): patched (θ + 2P)/3 vs candidate (θ + 2P + g)/4
    P = _sd(1.0, 1.0)
    model, soup, n, ok = soup_step(theta, P, 2, g, lambda sd: float(sd["w"][1]))
    assert ok and n == 3
    assert torch.allclose(model["w"], torch.tensor([6.0, 6.0]) / 4)
    assert torch.allclose(soup["w"], torch.tensor([2.0, 6.0]) / 3)
    model, soup, n, ok = soup_step(theta, P, 2, g, lambda sd: float(sd["w"][0]))
    assert not ok and n == 2 and torch.allclose(model["w"], torch.tensor([6.0, 2.0]) / 3)
    assert torch.equal(soup["w"], P["w"])


def test_fedsoup_client_keeps_the_better_of_patched_and_candidate(tiny):
    """Soup phase from round 0: the upload is θ or (θ + g)/2, whichever scores higher on the
    validation split (θ = the same client's model with the soup phase off); validation samples
    are kept out of training."""
    plain, clients, st = setup(tiny(**{"method.name": "fedsoup", "method.args.soup_start": 1.0}))
    soup, _, _ = setup(tiny(**{"method.name": "fedsoup", "method.args.soup_start": 0.0}))
    seen = set()
    for c in clients:
        theta = update(plain, st, c).upload
        upd = update(soup, st, c)
        _, val = soup.splits(c, st.client_states[c.cid])
        assert upd.num_samples == c.num_train - val.num_test and val.num_test == round(0.2 * c.num_train)
        half = {k: (theta[k].double() + st.shared[k].double()).div(2).to(theta[k].dtype)
                if theta[k].is_floating_point() else theta[k] for k in theta}
        accepted = soup.val_accuracy(half, val) > soup.val_accuracy(theta, val)
        expected = half if accepted else theta
        assert all(torch.allclose(upd.upload[k], expected[k], atol=1e-6) for k in expected), c.cid
        assert int(upd.state[SOUP_N]) == int(accepted)
        assert all(torch.equal(upd.state[PERSONAL + k], upd.upload[k]) for k in upd.upload)
        r = soup.evaluate(st.shared, upd.state, c, None)  # scored with its own model
        soup.model.load_state_dict({k: upd.upload[k] for k in upd.upload})
        assert r.correct == evaluate_model(soup.model, c).correct
        seen.add(accepted)
    assert seen == {True, False}  # both branches of the greedy rule occur here
    # the validation split is the same in every round
    a = soup.splits(clients[0], st.client_states[0])[1].test_y
    b = soup.splits(clients[0], st.client_states[0])[1].test_y
    assert torch.equal(a, b)


# GRACE -------------------------------------------------------------------------------------------

def test_coral_loss_by_hand():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(7, 3, generator=g), 2 * torch.randn(7, 3, generator=g)
    expected = ((torch.cov(a.T) - torch.cov(b.T)) ** 2).sum() / (4 * 9)
    assert torch.allclose(coral_loss(a, b), expected)


def test_grace_aggregation_weights_by_hand():
    ups = [[torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)]
           for a, b in (([1.0, 0.0], [2.0]), ([1.0, 1.0], [-2.0]), ([-1.0, 0.0], [2.0]))]
    flat = [torch.cat(u) for u in ups]
    cos = [[float(F.cosine_similarity(flat[i], flat[j], dim=0)) for j in range(3)] for i in range(3)]
    c = [(cos[k][(k + 1) % 3] + cos[k][(k + 2) % 3]) / 2 for k in range(3)]
    assert consistency(ups, "total") == pytest.approx(c)
    shifted = [v - min(c) + 1e-3 for v in c]  # min c < 0
    shifted = [v / max(shifted) for v in shifted] if max(shifted) > 1 else shifted
    n = [10, 20, 30]
    w = [s * k for s, k in zip(shifted, n)]
    assert cra_weights(c, n) == pytest.approx([v / sum(w) for v in w])
    # per-tensor similarities, plain and linearly re-weighted (first tensor 2x, last 0x, mean 1)
    per = [[[float(F.cosine_similarity(ups[i][t], ups[j][t], dim=0)) for t in range(2)] for j in range(3)]
           for i in range(3)]
    layer = [sum(sum(per[k][j]) / 2 for j in range(3) if j != k) / 2 for k in range(3)]
    reweighted = [sum(per[k][j][0] for j in range(3) if j != k) / 2 for k in range(3)]
    assert consistency(ups, "layer") == pytest.approx(layer)
    assert consistency(ups, "layer_reweight") == pytest.approx(reweighted)
    assert consistency(ups[:1]) == [1.0] and cra_weights([0.2, 0.2], [1, 3]) == pytest.approx([0.25, 0.75])


def test_grace_server_steps_along_the_reweighted_update(tiny):
    method, clients, st = setup(tiny(**{"method.name": "grace", "method.args.server_lr": 0.5}))
    ups = [update(method, st, c) for c in clients]
    new, server = method.aggregate(st.shared, ups, st.server_state, 0)
    deltas = [[st.shared[k].double() - u.upload[k].double() for k in method.param_keys] for u in ups]
    w = cra_weights(consistency(deltas), [u.num_samples for u in ups])
    assert server["cra_weights"].tolist() == pytest.approx(w)
    assert not w == pytest.approx([u.num_samples / sum(x.num_samples for x in ups) for u in ups])  # re-weighted
    for i, k in enumerate(method.param_keys):
        expected = st.shared[k].double() - 0.5 * sum(wk * d[i] for wk, d in zip(w, deltas))
        assert torch.allclose(new[k].double(), expected, atol=1e-6), k
    # each client keeps its trained model as its personalised model
    assert all(torch.equal(ups[0].state["p." + k], ups[0].upload[k]) for k in ups[0].upload)


@pytest.mark.parametrize("first_order", [True, False])
def test_grace_meta_gradient_adds_the_corrected_alignment_term(tiny, first_order):
    """∇_θ [CE(θ) + λ CORAL(φ_{θ'}(x), φ_g(x))], θ' = θ − α∇CE(θ), against an independent torch.func
    computation (first order: the alignment gradient is taken at θ' and added as is)."""
    lam, alpha = 1000.0, 0.5  # CORAL is divided by 4d²: a large λ makes its gradient visible
    method, clients, st = setup(tiny(**{"method.name": "grace", "method.args.first_order": first_order}))
    model = method.load(st.shared, {})
    with torch.no_grad():  # a local model away from the global one
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    gmodel = copy.deepcopy(method.load(st.shared, {}))
    x, y = first_batch(clients[0])
    model.train()
    method.meta_step(model, gmodel, x, y, lam, alpha)
    got = {n: p.grad.clone() for n, p in model.named_parameters()}

    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    target = gmodel.features(x).detach()

    def ce(ps):
        return F.cross_entropy(functional_call(model, ps, (x,)), y)

    def align(ps):
        feats = functional_call(model.features, {k[len("features."):]: v for k, v in ps.items()
                                                 if k.startswith("features.")}, (x,))
        return coral_loss(feats, target)

    g_ce = torch.func.grad(ce)(params)
    if first_order:
        fast = {n: params[n] - alpha * g_ce[n] for n in params}
        g_al = torch.func.grad(align)(fast)
        expected = {n: g_ce[n] + lam * g_al[n] for n in params}
    else:
        expected = torch.func.grad(
            lambda ps: ce(ps) + lam * align({n: ps[n] - alpha * torch.func.grad(ce)(ps)[n] for n in ps}))(params)
    for n in params:
        assert torch.allclose(got[n], expected[n], atol=1e-5), n
    assert any(not torch.allclose(got[n], g_ce[n], atol=1e-4) for n in params)  # the correction is there
    # λ = 0 (or warm-up) is plain CE
    model.zero_grad(set_to_none=True)
    method.meta_step(model, gmodel, x, y, 0.0, alpha)
    assert all(torch.allclose(p.grad, g_ce[n], atol=1e-6) for n, p in model.named_parameters())
