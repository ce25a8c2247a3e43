"""FedPer++ (Yi et al.): the FedPer limit, the feature and parameter regularisers' values and
gradients, and the prototypes."""
import torch
from support import BN_CNN, first_batch, perturbed, setup, update

from fedrepro.methods.fedperpp import PROTO_COUNT, PROTO_MASK, PROTO_SUM, PROTOS
from fedrepro.models import head_keys


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
    model.load_state_dict(perturbed(model.state_dict(), 0.1, 3))  # a local φ away from φ_g
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
    model.load_state_dict(perturbed(model.state_dict(), 0.1, 3))
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
