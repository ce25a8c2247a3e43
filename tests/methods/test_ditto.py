"""Ditto (Li et al., ICML 2021): the personal step (CE plus the proximal pull), the global step
(FedAvg's), what it scores, and its global model."""
import torch
from support import PLAIN_STEP, perturbed, setup, update

import fedrepro
from fedrepro.fl.local import evaluate_model
from fedrepro.methods.ditto import PERSONAL


def test_ditto_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "ditto", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_global_acc"] > 0.4, res.summary


def test_ditto_personal_step_is_ce_plus_proximal_pull_and_global_step_is_fedavg(tiny):
    """One full-batch plain-SGD step: v(λ) − v(0) = −lr·λ·(v − w^t), exactly; the upload is FedAvg's."""
    lam, lr = 0.6, 0.1
    res = {}
    for name, lam_ in (("ditto", lam), ("free", 0.0)):
        method, clients, st = setup(tiny(**PLAIN_STEP, **{"train.lr": lr, "method.name": "ditto",
                                                          "method.args.lam": lam_}))
        v = perturbed(st.shared, 0.1, 3)  # a personal model away from the global one
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
