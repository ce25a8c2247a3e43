"""What the CCMP analyses read off a PEP-FedPT model: class-averaged soft weights (Fig. 8) and the
cls tokens entering each block (Fig. 10)."""
import numpy as np
import pytest
import torch
from support import setup

from fedrepro.analysis.ccmp import class_prompt_similarity, cls_tokens, soft_weights_by_class
from fedrepro.errors import ConfigError
from fedrepro.methods.prompted import class_prior

VIT = {"model.name": "tiny_vit", "model.args": {"dim": 16, "depth": 4, "heads": 2}}


@pytest.fixture
def pep(tiny):
    method, clients, st = setup(tiny(**VIT, **{"method.name": "pep_fedpt", "method.args": {"ccmp_blocks": [1, 2]},
                                               "data.partition": "pathological",
                                               "data.partition_args": {"classes_per_client": 2}}))
    gen = torch.Generator().manual_seed(0)
    shared = {**st.shared, "mu": torch.randn(st.shared["mu"].shape, generator=gen), "mu_ready": torch.tensor(1)}
    return method, clients, shared


def test_soft_weights_are_distributions_over_each_clients_own_classes(pep):
    method, clients, shared = pep
    w = soft_weights_by_class(method, shared, clients[:1])
    held = sorted(set(clients[0].train_y.tolist()))
    assert w.shape == (2, 4, 4)
    for c in range(4):
        if (clients[0].test_y == c).any():
            np.testing.assert_allclose(w[:, c].sum(-1), 1.0, rtol=1e-6)
            absent = [k for k in range(4) if k not in held]
            assert np.all(w[:, c, absent] == 0)  # the prior rules them out (Eq. 13)
        else:
            assert np.isnan(w[:, c]).all()
    assert (class_prior(clients[0].train_y, 4) > 0).sum() == len(held)


def test_soft_weights_without_the_prior_spread_over_every_class(tiny):
    method, clients, st = setup(tiny(**VIT, **{"method.name": "pep_fedpt",
                                               "method.args": {"ccmp_blocks": [1], "use_prior": False}}))
    shared = {**st.shared, "mu": torch.randn(st.shared["mu"].shape), "mu_ready": torch.tensor(1)}
    w = soft_weights_by_class(method, shared, clients[:1])
    present = ~np.isnan(w[0, :, 0])
    assert np.all(w[0, present] > 0)


def test_the_similarity_term_alone_leaves_the_prior_out(pep):
    # pep_fedpt.soft_weights_peak_on_true_class reads it: with the prior, classes outside the client's
    # set get no weight; without it, every class gets some.
    method, clients, shared = pep
    w = soft_weights_by_class(method, shared, clients[:1], prior=False)
    present = ~np.isnan(w[0, :, 0])
    assert np.all(w[:, present] > 0)
    np.testing.assert_allclose(w[:, present].sum(-1), 1.0, rtol=1e-6)


def test_cls_tokens_are_those_each_block_receives(pep):
    method, clients, shared = pep
    feats, labels, owners = cls_tokens(method, shared, clients[:2], [0, 2, 4], max_per_client=7)
    assert feats.shape[:2] == (3, 14) and feats.shape[2] == 16
    assert len(labels) == len(owners) == 14 and set(owners) == {clients[0].cid, clients[1].cid}
    # Before any block the cls token is the same learned vector for every image (Table 12's point).
    np.testing.assert_allclose(feats[0], np.broadcast_to(feats[0][:1], feats[0].shape), atol=1e-6)
    # The last index is the final-norm cls the head reads.
    net = method.load(shared, clients[0])
    x, _ = next(clients[0].test_batches(10_000))
    with torch.no_grad():
        full = net.cls_per_block(x)
        torch.testing.assert_close(net.head(full[:, -1]), net(x))
    with pytest.raises(ConfigError, match="blocks"):
        cls_tokens(method, shared, clients[:1], [9])


def test_class_prompt_similarity_is_a_cosine_matrix():
    s = class_prompt_similarity(torch.tensor([[[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]]]))
    np.testing.assert_allclose(s, [[1, 0, 2 ** -0.5], [0, 1, 2 ** -0.5], [2 ** -0.5, 2 ** -0.5, 1]], atol=1e-6)
