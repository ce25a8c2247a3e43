"""FedDC (Gao et al., CVPR 2022): the drift penalty and gradient correction of one local step, the
server's drift-corrected average and its update of c, and a global model that learns."""
import pytest
import torch
from support import BN_CNN, PLAIN_STEP, check_batchnorm_buffers, fedavg_step, model_part, setup, update

import fedrepro
from fedrepro.methods.feddc import DC, C, H, effective_steps


@pytest.mark.parametrize("name", ["feddc"])
def test_runs_with_batchnorm_buffers(tiny, name):
    """Buffers (BN running statistics, the integer step counter) are averaged like FedAvg's."""
    check_batchnorm_buffers(tiny(**BN_CNN, **{"method.name": name}))


def _random_like(tensors, scale, seed):
    g = torch.Generator().manual_seed(seed)
    return {k: scale * torch.randn(v.shape, generator=g) for k, v in tensors.items()}


def test_feddc_local_step_has_drift_penalty_and_gradient_correction(tiny):
    """One plain-SGD step from θ = w: FedDC − FedAvg = −lr·(α·h_i + c − c_i); then h, c_i, upload by hand."""
    lr, alpha = 0.1, 0.3
    method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddc",
                                                      "method.args.alpha": alpha}))
    cl = clients[0]
    names = method.param_names
    w = {n: st.shared[n] for n in names}
    h = _random_like(w, 0.2, 1)
    c_i = _random_like(w, 0.3, 2)
    shared = dict(st.shared)
    shared.update({C + n: v for n, v in _random_like(w, 0.3, 3).items()})
    state = {**{H + n: h[n] for n in names}, **{C + n: c_i[n] for n in names}}
    upd = update(method, st, cl, state=state, shared=shared)
    plain = fedavg_step(tiny, model_part(method, st.shared), cl, lr)
    for n in names:
        c = shared[C + n]
        theta = plain[n] - lr * (alpha * h[n] + c - c_i[n])
        h_new = h[n] + theta - w[n]
        assert torch.allclose(upd.state[H + n], h_new, atol=1e-6), n
        assert torch.allclose(upd.upload[n], theta + h_new, atol=1e-6), n  # the drift-corrected model
        # SCAFFOLD option II with K = 1 step of size lr: c_i' = c_i − c + (w − θ)/lr
        c_new = c_i[n] - c + (w[n] - theta) / lr
        assert torch.allclose(upd.state[C + n], c_new, atol=1e-4), n
        assert torch.allclose(upd.upload[DC + n], c_new - c_i[n], atol=1e-4), n
    # h_i and c_i stay on the client: the upload carries θ + h and Δc only
    assert not any(k.startswith((H, C)) for k in upd.upload)
    # α = 0 and c = c_i = 0 is FedAvg's step; θ + h = 2θ − w then
    free, clients0, st0 = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddc",
                                                      "method.args.alpha": 0.0}))
    first = update(free, st0, clients0[0])
    for n in names:
        assert torch.allclose(first.upload[n], 2 * plain[n] - w[n], atol=1e-6)


def test_feddc_raw_correction_keeps_the_raw_update(tiny):
    lr = 0.1
    method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "feddc",
                                                      "method.args.correction_update": "raw"}))
    shared = dict(st.shared)
    shared.update({C + n: v for n, v in _random_like({n: st.shared[n] for n in method.param_names}, 0.3, 3).items()})
    upd = update(method, st, clients[1], shared=shared)
    for n in method.param_names:
        theta = upd.state[H + n] + st.shared[n]  # h started at 0
        assert torch.allclose(upd.state[C + n], (st.shared[n] - theta) / lr, atol=1e-4)


@pytest.mark.parametrize("weighting", ["uniform", "samples"])
def test_feddc_server_averages_drift_corrected_models_and_updates_c(tiny, weighting):
    method, clients, st = setup(tiny(**{"method.name": "feddc", "method.args.weighting": weighting,
                                        "data.holdout_clients": 1}))
    assert method.num_trainable == 3  # held-out clients never train: not part of c's average
    ups = [update(method, st, c) for c in clients[:2]]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    wts = [1.0, 1.0] if weighting == "uniform" else [float(u.num_samples) for u in ups]
    for k in method.shared_keys:
        expected = (wts[0] * ups[0].upload[k] + wts[1] * ups[1].upload[k]) / sum(wts)
        assert torch.allclose(new[k], expected, atol=1e-6), k
    for n in method.param_names:
        expected = st.shared[C + n] + (ups[0].upload[DC + n] + ups[1].upload[DC + n]) / 3
        assert torch.allclose(new[C + n], expected, atol=1e-7)
        assert new[C + n].abs().sum() > 0
    # the global model is the average itself
    g = method.global_model(new, st.server_state)
    assert all(torch.equal(g.state_dict()[k], new[k]) for k in method.shared_keys)


def test_effective_steps_match_sgd_with_momentum():
    assert effective_steps(7, 0.0) == 7
    assert effective_steps(1, 0.9) == pytest.approx(1.0)
    assert effective_steps(2, 0.9) == pytest.approx(1.0 + 1.9)
    # K steps of torch's SGD(momentum) on a constant gradient move lr·S·g
    for k, beta in ((5, 0.9), (40, 0.5)):
        p = torch.nn.Parameter(torch.zeros(3))
        g = torch.tensor([1.0, -2.0, 0.5])
        opt = torch.optim.SGD([p], lr=0.01, momentum=beta)
        for _ in range(k):
            opt.zero_grad()
            (p * g).sum().backward()
            opt.step()
        assert torch.allclose(-p.detach(), 0.01 * effective_steps(k, beta) * g, atol=1e-6)


def test_feddc_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "feddc", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
