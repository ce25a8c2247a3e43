"""FedSoup (Chen et al., MICCAI 2023; a pFedCSPC global-FL baseline): greedy model-soup interpolation,
the client's choice between patched and candidate models, and a global model that learns."""
import torch
from support import setup, update

import fedrepro
from fedrepro.fl.local import evaluate_model
from fedrepro.methods.fedsoup import PERSONAL, SOUP_N, soup_step


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


def test_fedsoup_global_model_learns(tiny):
    res = fedrepro.run(tiny(**{"method.name": "fedsoup", "train.rounds": 3, "train.local_epochs": 2,
                               "train.global_eval": True}))
    assert res.summary["final_acc_mean"] > 0.5, res.summary  # 4 balanced classes: chance is 0.25
    assert res.summary["final_global_acc"] > 0.4, res.summary
