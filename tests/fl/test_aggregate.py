"""fl.aggregate.weighted_average: identity, weights, permutation invariance, convexity, bad input."""
import pytest
import torch

from fedrepro.fl import weighted_average


def test_weighted_average_of_identical_states_is_identity():
    s = {"w": torch.randn(3, 4), "n": torch.tensor(7)}
    out = weighted_average([s, s, s], [1, 5, 2])
    assert torch.allclose(out["w"], s["w"]) and out["n"].item() == 7 and out["n"].dtype == s["n"].dtype


def test_weighted_average_weights_and_permutation_invariance():
    a, b = {"w": torch.zeros(2)}, {"w": torch.ones(2)}
    assert torch.allclose(weighted_average([a, b], [1, 3])["w"], torch.full((2,), 0.75))
    assert torch.allclose(weighted_average([b, a], [3, 1])["w"], torch.full((2,), 0.75))
    # scaling all weights changes nothing
    assert torch.allclose(weighted_average([a, b], [10, 30])["w"], torch.full((2,), 0.75))


def test_weighted_average_is_convex_combination():
    g = torch.Generator().manual_seed(0)
    states = [{"w": torch.randn(5, generator=g)} for _ in range(4)]
    out = weighted_average(states, [1, 2, 3, 4])["w"]
    stacked = torch.stack([s["w"] for s in states])
    assert torch.all(out <= stacked.max(0).values + 1e-6) and torch.all(out >= stacked.min(0).values - 1e-6)


def test_weighted_average_rejects_bad_input():
    with pytest.raises(ValueError):
        weighted_average([], [])
    with pytest.raises(ValueError):
        weighted_average([{"w": torch.zeros(1)}], [0])
    with pytest.raises(ValueError):
        weighted_average([{"w": torch.zeros(1)}, {"v": torch.zeros(1)}], [1, 1])


def test_weighted_average_sums_in_float64_in_client_order():
    # The reference: each state cast to float64, then added one by one with its normalised weight.
    g = torch.Generator().manual_seed(1)
    states = [{"w": torch.randn(64, generator=g), "n": torch.tensor(i)} for i in range(7)]
    weights = [3, 1, 4, 1, 5, 9, 2]
    w = torch.tensor(weights, dtype=torch.float64) / sum(weights)
    ref = torch.zeros(64, dtype=torch.float64)
    for s, wi in zip(states, w.tolist()):
        ref += s["w"].double() * wi
    out = weighted_average(states, weights)
    assert torch.equal(out["w"], ref.float())
    assert out["n"].item() == round(float(sum(i * wi for i, wi in enumerate(w.tolist()))))
