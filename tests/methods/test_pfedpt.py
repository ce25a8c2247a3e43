"""pFedPT (Li et al.; a FedPFT baseline): the visual prompt is a border that stays on the client,
trained with the backbone frozen, then the backbone."""
import torch
from support import setup, update

from fedrepro.methods.pfedpt import PROMPT


def test_pfedpt_prompt_is_a_border_that_stays_on_the_client(tiny):
    method, clients, st = setup(tiny(**{"method.name": "pfedpt",
                                        "method.args": {"prompt_init": "zeros", "prompt_epochs": 1}}))
    ups = [update(method, st, c) for c in clients[:2]]
    for u in ups:
        assert set(u.upload) == set(method.model.state_dict()) == set(st.shared)
        assert not any(k.startswith(PROMPT) for k in u.upload) and any(k.startswith(PROMPT) for k in u.state)
    x = next(clients[0].test_batches(8))[0]
    added = []
    for u in ups:
        delta = method.personalized_model(st.shared, u.state).features[0](x) - x
        p = method.p.prompt_size
        assert torch.all(delta[..., p:-p, p:-p] == 0)  # interior pixels untouched
        assert delta.abs().sum() > 0
        added.append(delta[0])
    assert not torch.allclose(added[0], added[1])  # each client learned its own prompt


def test_pfedpt_trains_the_prompt_with_the_backbone_frozen_then_the_backbone(tiny):
    cfg = tiny(**{"method.name": "pfedpt", "method.args": {"prompt_epochs": 1, "model_epochs": 0}})
    method, clients, st = setup(cfg)
    upd = update(method, st, clients[0])
    assert all(torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)  # backbone untouched
    assert any(not torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # prompt moved
    method, clients, st = setup(cfg.replace(**{"method.args": {"prompt_epochs": 0, "model_epochs": 1}}))
    upd = update(method, st, clients[0])
    assert all(torch.equal(upd.state[k], st.client_states[0][k]) for k in upd.state)  # prompt untouched
    assert any(not torch.equal(upd.upload[k], st.shared[k]) for k in st.shared)
