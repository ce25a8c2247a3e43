"""CCVR (Luo et al., NeurIPS 2021; a pFedCSPC global-FL baseline): the merged class statistics, what
they describe, the head-only calibration, and a global model that learns."""
import torch
from support import first_batch, setup, update

import fedrepro
from fedrepro.fl.aggregate import weighted_average
from fedrepro.methods.ccvr import STATS, class_statistics, merge_statistics, sample_virtual


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


def test_ccvr_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "ccvr", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
