"""LG-FedAvg, FedPer++ and Ditto: each learns, and each one's characteristic mechanism does what its paper says."""
import pytest
import torch

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.local import evaluate_model
from fedrepro.methods import METHODS
from fedrepro.methods.ditto import PERSONAL
from fedrepro.methods.fedperpp import PROTO_COUNT, PROTO_MASK, PROTO_SUM, PROTOS
from fedrepro.models import head_keys
from support import BN_CNN, PLAIN_STEP, first_batch, setup, update





def perturbed(sd, scale=0.1, seed=3):
    g = torch.Generator().manual_seed(seed)
    return {k: (v + scale * torch.randn(v.shape, generator=g)) if v.is_floating_point() else v.clone()
            for k, v in sd.items()}


@pytest.mark.parametrize("name", ["lgfed", "fedperpp", "ditto"])
def test_learns_on_synthetic(tiny, name):
    res = fedrepro.run(tiny(**{"method.name": name, "train.rounds": 3, "train.local_epochs": 2}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25


def test_ditto_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "ditto", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_global_acc"] > 0.4, res.summary


@pytest.mark.parametrize("name, args, key", [
    ("lgfed", {"global_part": "body"}, "global_part"), ("lgfed", {"fedavg_warmup_rounds": -1}, "fedavg_warmup_rounds"),
    ("fedperpp", {"reg": "l1"}, "reg"), ("fedperpp", {"mu": -1.0}, "mu"),
    ("ditto", {"lam": -0.1}, "lam"), ("ditto", {"personal_epochs": 1.5}, "personal_epochs"),
])
def test_bad_hyperparameters_name_the_key(name, args, key):
    with pytest.raises(ConfigError, match=f"method.args.{key}"):
        METHODS.get(name).parse_params(args)


# LG-FedAvg ---------------------------------------------------------------------------------------

def test_lgfed_averages_only_the_classifier_and_keeps_local_extractors(tiny):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "lgfed"}))
    heads = head_keys(method.model)
    local = set(method.model.state_dict()) - heads
    ups = [update(method, st, c) for c in clients]
    for u in ups:
        assert set(u.upload) == heads  # only the classifier leaves the client
        assert set(u.state) == local  # the extractor (BatchNorm statistics too) stays
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    n = torch.tensor([float(u.num_samples) for u in ups])
    for k in heads:
        manual = sum(w * u.upload[k].double() for w, u in zip(n / n.sum(), ups))
        assert torch.allclose(shared[k].double(), manual, atol=1e-6), k
    for k in local:  # the server's copy of the local layers is only a starting point: never averaged
        assert torch.equal(shared[k], st.shared[k]), k
    k = next(k for k in local if k.endswith("weight"))
    assert not torch.equal(ups[0].state[k], ups[1].state[k])
    # each client is scored with its own extractor under the common classifier
    x, _ = first_batch(clients[0])
    outs = []
    for u in ups[:2]:
        m = method.personalized_model(shared, u.state)
        m.eval()
        with torch.no_grad():
            outs.append(m(x).clone())
        assert torch.equal(m.head.weight, shared["head.weight"])
    assert not torch.allclose(outs[0], outs[1])
    r = method.evaluate(shared, ups[0].state, clients[0], None)
    assert r.correct == evaluate_model(method.personalized_model(shared, ups[0].state), clients[0]).correct
    assert method.global_model(shared, st.server_state) is None


def test_lgfed_fedavg_warmup_then_local_layers_start_from_the_average(tiny):
    method, clients, st = setup(tiny(**{"method.name": "lgfed", "method.args.fedavg_warmup_rounds": 1}))
    everything = set(method.model.state_dict())
    heads = head_keys(method.model)
    ups = [update(method, st, c, rnd=0) for c in clients]
    assert all(set(u.upload) == everything and u.state == {} for u in ups)  # round 0: plain FedAvg
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    n = torch.tensor([float(u.num_samples) for u in ups])
    for k in everything:
        manual = sum(w * u.upload[k].double() for w, u in zip(n / n.sum(), ups))
        assert torch.allclose(shared[k].double(), manual, atol=1e-6), k
    # a client without local layers yet is scored with (and starts from) the averaged model
    m = method.personalized_model(shared, {})
    assert all(torch.equal(v, shared[k]) for k, v in m.state_dict().items())
    # round 1: local from here on, starting from the average
    u = update(method, st, clients[0], rnd=1, state={}, shared=shared)
    assert set(u.upload) == heads and set(u.state) == everything - heads
    again = update(method, st, clients[0], rnd=1, state={k: shared[k] for k in everything - heads}, shared=shared)
    assert all(torch.equal(u.state[k], again.state[k]) for k in u.state)


def test_lgfed_projection_and_head_federates_the_projection_too(tiny):
    moon = {"model.name": "moon_cnn", "model.args": {"projection_dim": 12}, "data.dataset_args.image_size": 16}
    lg = {"method.name": "lgfed", "method.args.global_part": "projection_and_head"}
    method, clients, st = setup(tiny(**moon, **lg))
    proj = {k for k in method.model.state_dict() if k.startswith("features.projection.")}
    assert proj and set(method.global_keys) == head_keys(method.model) | proj
    assert all(k.startswith("features.encoder.") for k in method.local_keys)
    with pytest.raises(ConfigError, match="method.args.global_part"):
        setup(tiny(**lg))  # the mlp has no projection


# FedPer++ ----------------------------------------------------------------------------------------

def test_fedperpp_without_regulariser_is_fedper_and_with_it_differs(tiny):
    per, clients, st_per = setup(tiny(**BN_CNN, **{"method.name": "fedper"}))
    none, _, st_none = setup(tiny(**BN_CNN, **{"method.name": "fedperpp", "method.args.reg": "none"}))
    feat, _, st_feat = setup(tiny(**BN_CNN, **{"method.name": "fedperpp", "method.args.mu": 5.0}))
    a, b, c = (update(m, s, clients[0]) for m, s in ((per, st_per), (none, st_none), (feat, st_feat)))
    assert set(b.upload) == set(a.upload) == set(st_per.shared) and set(b.state) == head_keys(per.model)
    assert all(torch.equal(a.upload[k], b.upload[k]) for k in a.upload)
    assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    assert any(not torch.equal(a.upload[k], c.upload[k]) for k in a.upload)  # the regulariser acts
    assert c.metrics["loss_reg"] > 0 and none.global_model(st_none.shared, {}) is None


def test_fedperpp_feature_regulariser_value_and_gradient(tiny):
    """R = (μ/2)·mean_i ‖φ(x_i) − φ_g(x_i)‖²; for the MLP's φ = relu(W a + b),
    ∂R/∂W = (μ/B)·((z − t)⊙[z > 0])ᵀ a."""
    mu = 0.7
    method, clients, st = setup(tiny(**{"method.name": "fedperpp", "method.args.mu": mu}))
    model = method.load(st.shared, st.client_states[0])
    model.load_state_dict(perturbed(model.state_dict()))  # a local φ away from φ_g
    method.load_anchor(st.shared)
    x, y = first_batch(clients[0])
    model.zero_grad(set_to_none=True)
    z = model.features(x)
    reg = method.regularizer(model, x, y, z, st.shared)
    reg.backward()
    a = x.flatten(1)
    with torch.no_grad():
        t = torch.relu(a @ st.shared["features.net.1.weight"].T + st.shared["features.net.1.bias"])
        zz = torch.relu(a @ model.features.net[1].weight.T + model.features.net[1].bias)
        assert torch.allclose(reg, 0.5 * mu * (zz - t).pow(2).sum(1).mean(), atol=1e-6)
        resid = mu * (zz - t) * (zz > 0) / len(y)
    assert torch.allclose(model.features.net[1].weight.grad, resid.T @ a, atol=1e-6)
    assert torch.allclose(model.features.net[1].bias.grad, resid.sum(0), atol=1e-6)
    assert all(p.grad is None for p in model.head.parameters())  # R never touches the personal head


def test_fedperpp_param_regulariser_gradient_is_the_proximal_pull(tiny):
    mu = 0.3
    method, clients, st = setup(tiny(**{"method.name": "fedperpp", "method.args.reg": "param", "method.args.mu": mu}))
    model = method.load(st.shared, st.client_states[0])
    model.load_state_dict(perturbed(model.state_dict()))
    x, y = first_batch(clients[0])
    model.zero_grad(set_to_none=True)
    method.regularizer(model, x, y, model.features(x), st.shared).backward()
    for name, p in model.features.named_parameters(prefix="features"):
        assert torch.allclose(p.grad, mu * (p.detach() - st.shared[name]), atol=1e-6), name


def test_fedperpp_prototypes_are_count_weighted_class_means_and_pull_features(tiny):
    mu = 0.5
    method, clients, st = setup(tiny(**{"method.name": "fedperpp", "method.args.reg": "prototype",
                                        "method.args.mu": mu}))
    assert not st.shared[PROTO_MASK].any()
    x, y = first_batch(clients[0])
    model = method.load(st.shared, st.client_states[0])
    assert method.regularizer(model, x, y, model.features(x), st.shared) == 0  # no centroid yet
    ups = [update(method, st, c) for c in clients]
    c_num = method.model.num_classes
    sums, counts = torch.zeros(c_num, method.model.feature_dim, dtype=torch.float64), torch.zeros(c_num)
    for u, c in zip(ups, clients):
        assert set(u.upload) == set(method.shared_keys) | {PROTO_SUM, PROTO_COUNT}  # the head stays local
        m = method.load({**st.shared, **u.upload}, u.state)
        m.eval()
        with torch.no_grad():
            f = m.features(first_batch(c)[0]).double()
        for j in range(c_num):
            sel = c.train_y == j
            assert int(u.upload[PROTO_COUNT][j]) == int(sel.sum())
            assert torch.allclose(u.upload[PROTO_SUM][j].double(), f[sel].sum(0), atol=1e-4)
            sums[j] += f[sel].sum(0)
            counts[j] += sel.sum()
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    seen = counts > 0
    assert torch.equal(shared[PROTO_MASK], seen)
    assert torch.allclose(shared[PROTOS][seen].double(), sums[seen] / counts[seen, None], atol=1e-5)
    # R pulls each sample's feature towards its class centroid
    model = method.load(shared, ups[0].state)
    z = model.features(x)
    reg = method.regularizer(model, x, y, z, shared)
    has = shared[PROTO_MASK][y]
    expected = 0.5 * mu * ((z - shared[PROTOS][y]).pow(2).sum(1) * has).sum() / len(y)
    assert reg > 0 and torch.allclose(reg, expected, atol=1e-6)


# Ditto -------------------------------------------------------------------------------------------

def test_ditto_personal_step_is_ce_plus_proximal_pull_and_global_step_is_fedavg(tiny):
    """One full-batch plain-SGD step: v(λ) − v(0) = −lr·λ·(v − w^t), exactly; the upload is FedAvg's."""
    lam, lr = 0.6, 0.1
    res = {}
    for name, lam_ in (("ditto", lam), ("free", 0.0)):
        method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "ditto",
                                                          "method.args.lam": lam_}))
        v = perturbed(st.shared)  # a personal model away from the global one
        res[name] = update(method, st, clients[0], state={PERSONAL + k: t for k, t in v.items()})
    w = st.shared
    for k in w:
        diff = res["ditto"].state[PERSONAL + k] - res["free"].state[PERSONAL + k]
        assert torch.allclose(diff, -lr * lam * (v[k] - w[k]), atol=1e-6), k
    avg, clients, st_avg = setup(tiny(**PLAIN_STEP, **{"train.lr": lr}))
    fedavg = update(avg, st_avg, clients[0])
    for name in res:  # the uploaded global update ignores λ and v: it is FedAvg's client step
        assert set(res[name].upload) == set(w) and not any(k.startswith(PERSONAL) for k in res[name].upload)
        assert all(torch.equal(res[name].upload[k], fedavg.upload[k]) for k in w)


def test_ditto_scores_the_personal_model_and_its_global_model_is_the_average(tiny):
    method, clients, st = setup(tiny(**{"method.name": "ditto"}))
    ups = [update(method, st, c) for c in clients]
    shared, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    n = torch.tensor([float(u.num_samples) for u in ups])
    g = method.global_model(shared, st.server_state)
    for k, v in g.state_dict().items():
        manual = sum(w * u.upload[k].double() for w, u in zip(n / n.sum(), ups))
        assert torch.allclose(v.double(), manual, atol=1e-6), k
    pm = method.personalized_model(shared, ups[0].state)
    assert all(torch.equal(v, ups[0].state[PERSONAL + k]) for k, v in pm.state_dict().items())
    r = method.evaluate(shared, ups[0].state, clients[0], None)
    assert r.correct == evaluate_model(pm, clients[0]).correct
    # the personal model is not the global one, so the score is the personal model's
    assert any(not torch.equal(ups[0].state[PERSONAL + k], shared[k]) for k in shared)
