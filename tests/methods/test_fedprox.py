"""FedProx (Li et al., MLSys 2020): the proximal gradient, exactly, and the FedAvg limit at mu = 0."""
import torch
from support import setup

import fedrepro
from fedrepro.fl.seeding import torch_gen


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
