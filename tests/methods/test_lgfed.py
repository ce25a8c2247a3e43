"""LG-FedAvg (Liang et al.): only the classifier is averaged, the FedAvg warm-up, and the
projection-and-head variant."""
import pytest
import torch
from support import BN_CNN, first_batch, setup, update

from fedrepro.errors import ConfigError
from fedrepro.fl.local import evaluate_model
from fedrepro.models import head_keys


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
