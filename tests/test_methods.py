"""Each baseline learns, and each one's characteristic mechanism does what its paper says."""
import pytest
import torch

import fedrepro
from fedrepro.data import list_datasets
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods import METHODS
from fedrepro.models import bn_keys, head_keys
from support import BN_CNN, setup




# The FedPFT family trains φ for only R_a = 1 of its 5 local epochs, so it gets more rounds; and
# MoCo's crop (down to 20% of the area) would leave about 2×2 pixels of these 8×8 images.
SMALL_IMAGE_AUG = {"aug_crop_min": 0.8, "aug_jitter": 0.1}
LEARNING_OVERRIDES = {
    "fedpft": {"train.rounds": 8},
    "fedpft_con": {"train.rounds": 8, "method.args": SMALL_IMAGE_AUG},
    "fedpft_two_stage": {"train.rounds": 8, "method.args": {**SMALL_IMAGE_AUG, "stage1_rounds": 2}},
    "fedavg_linear": {"train.rounds": 8},
    # ASAM's ρ = 0.7 (FedASAM's CIFAR setting) perturbs a 4-channel BN-CNN hard: it learns, slower.
    "fedasam": {"train.rounds": 8},
}


@pytest.mark.parametrize("name", METHODS.names())
def test_every_method_beats_chance_on_synthetic(tiny, name):
    # 4 balanced classes: chance is 25%.
    overrides = {"train.rounds": 4, "train.local_epochs": 2, **LEARNING_OVERRIDES.get(name, {})}
    res = fedrepro.run(tiny(**BN_CNN, **{"method.name": name}, **overrides))
    assert res.summary["final_acc_mean"] > 0.5, res.summary


def test_fedavg_global_model_is_sample_weighted_mean(tiny):
    method, clients, st = setup(tiny())
    ups = [method.client_update(st.shared, st.client_states[c.cid], c, torch_gen(0, "client", 0, c.cid), 0)
           for c in clients]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    n = torch.tensor([float(u.num_samples) for u in ups])
    for k in new:
        manual = sum(w * u.upload[k].double() for w, u in zip(n / n.sum(), ups))
        assert torch.allclose(new[k].double(), manual, atol=1e-6)
    assert [u.num_samples for u in ups] == [c.num_train for c in clients]


def test_local_uploads_nothing_and_keeps_distinct_models(tiny):
    method, clients, st = setup(tiny(**{"method.name": "local"}))
    ups = [method.client_update(st.shared, st.client_states[c.cid], c, torch_gen(0, "client", 0, c.cid), 0)
           for c in clients[:2]]
    assert ups[0].upload == {} and st.shared == {}
    k = next(iter(ups[0].state))
    assert not torch.equal(ups[0].state[k], ups[1].state[k])


@pytest.mark.parametrize("name, keys_of", [("fedper", head_keys), ("fedrep", head_keys), ("fedbn", bn_keys)])
def test_personal_layers_never_leave_the_client(tiny, name, keys_of):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": name}))
    personal = keys_of(method.model)
    assert personal, "the model must have layers of this kind"
    upd = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0)
    assert not personal & set(upd.upload) and not personal & set(st.shared)
    assert personal <= set(upd.state)
    new, _ = method.aggregate(st.shared, [upd], st.server_state, 0)
    assert set(new) == set(st.shared)


def test_fedbn_keeps_running_statistics_local(tiny):
    method, clients, st = setup(tiny(**BN_CNN, **{"method.name": "fedbn"}))
    running = [k for k in bn_keys(method.model) if k.endswith("running_mean")]
    assert running
    s0 = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0).state
    s1 = method.client_update(st.shared, st.client_states[1], clients[1], torch_gen(0, "client", 0, 1), 0).state
    assert not torch.equal(s0[running[0]], s1[running[0]])


def test_fedprox_adds_the_proximal_gradient(tiny):
    """One full-batch plain-SGD step: FedProx − FedAvg = −lr·μ·(w − w_global), exactly."""
    mu, lr = 0.7, 0.1
    base = {"train.momentum": 0.0, "train.lr": lr, "train.batch_size": 10_000, "train.local_epochs": 1}
    prox, clients, st = setup(tiny(**base, **{"method.name": "fedprox", "method.args.mu": mu}))
    avg, _, _ = setup(tiny(**base))
    anchor = {k: v.clone() for k, v in st.shared.items()}
    start = {k: v + 0.05 * torch.randn(v.shape, generator=torch.Generator().manual_seed(1)) if v.is_floating_point()
             else v for k, v in anchor.items()}
    after = {}
    for name, m in (("prox", prox), ("avg", avg)):
        model = m.load(start, {})
        m.local_train(model, clients[0], torch_gen(0, "client", 0, 0), anchor, 0)
        after[name] = {k: v.clone() for k, v in model.named_parameters()}
    for k in after["prox"]:
        expected = -lr * mu * (start[k] - anchor[k])
        assert torch.allclose(after["prox"][k] - after["avg"][k], expected, atol=1e-5), k


def test_fedprox_with_mu_zero_is_fedavg(tiny):
    a = fedrepro.run(tiny(**{"method.name": "fedprox", "method.args.mu": 0.0}))
    b = fedrepro.run(tiny())
    assert a.clients["acc"].tolist() == b.clients["acc"].tolist()


def test_fedrep_trains_head_with_body_frozen_then_body_with_head_frozen(tiny):
    cfg = tiny(**{"method.name": "fedrep", "method.args": {"head_epochs": 2, "body_epochs": 0}})
    method, clients, st = setup(cfg)
    upd = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0)
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)  # φ untouched
    assert any(not torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # head moved
    cfg = cfg.replace(**{"method.args": {"head_epochs": 0, "body_epochs": 1}})
    method, clients, st = setup(cfg)
    upd = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0)
    assert all(torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # head untouched
    assert any(not torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)


def test_fedavg_ft_evaluation_fine_tunes_without_side_effects(tiny):
    method, clients, st = setup(tiny(**{"method.name": "fedavg_ft", "method.args.ft_epochs": 3}))
    before = {k: v.clone() for k, v in st.shared.items()}
    r1 = method.evaluate(st.shared, st.client_states[0], clients[0], torch_gen(0, "eval", 1, 0))
    r2 = method.evaluate(st.shared, st.client_states[0], clients[0], torch_gen(0, "eval", 1, 0))
    assert (r1.correct, r1.loss_sum) == (r2.correct, r2.loss_sum)
    assert all(torch.equal(before[k], st.shared[k]) for k in before)
    plain = METHODS.get("fedavg").evaluate(method, st.shared, st.client_states[0], clients[0], None)
    assert (plain.correct, plain.loss_sum) != (r1.correct, r1.loss_sum)


@pytest.mark.skipif("fashion_mnist" not in list_datasets(), reason="no fashion_mnist loader")
def test_fedavg_and_local_learn_fashion_mnist_smoke(tmp_path):
    from fedrepro.errors import DataNotFoundError

    try:
        results = {m: fedrepro.run(profile="smoke", runs_dir=str(tmp_path), progress=False, method__name=m,
                                   train__rounds=3)
                   for m in ("fedavg", "local")}
    except DataNotFoundError as e:
        pytest.skip(f"Fashion-MNIST not installed: {e}")
    for m, res in results.items():
        assert res.summary["final_acc_mean"] > 0.4, (m, res.summary)  # chance is 0.10
