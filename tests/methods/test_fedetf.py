"""FedETF (Li et al., ICCV 2023; a pFedCSPC global-FL baseline): the simplex ETF, the logits and loss
with the fixed classifier, the personalisation step, and a global model that learns."""
import pytest
import torch
import torch.nn.functional as F
from support import first_batch, setup, update

import fedrepro
from fedrepro.fl.seeding import torch_gen
from fedrepro.methods.fedetf import ETF_KEY, balanced_feature_loss, simplex_etf


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


def test_fedetf_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "fedetf", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
