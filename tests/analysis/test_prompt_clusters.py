"""FedOTP (CVPR 2024) Fig. A5: the local-prompt clustering statistic, groups, t-SNE and the figure."""
import matplotlib
import numpy as np
import pytest
import torch

import fedrepro
from fedrepro.analysis.prompt_clusters import (
    class_overlap_correlation,
    client_groups,
    clustering_stat,
    cosine_matrix,
    local_prompts,
    plot_prompt_clusters,
    prompt_tsne,
    run_prompt_clusters,
)
from fedrepro.errors import ConfigError
from fedrepro.fl.client_data import ClientData

matplotlib.use("Agg")


def grouped(n_groups=4, per_group=5, dim=64, noise=0.5, seed=0):
    """Prompts planted around one centre per group, and the group labels."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_groups, dim))
    groups = np.repeat(np.arange(n_groups), per_group)
    return centres[groups] + noise * rng.standard_normal((len(groups), dim)), groups


def client(cid, classes, domain=None):
    y = torch.tensor(classes, dtype=torch.long)
    x = torch.zeros(len(classes), 1, 4, 4, dtype=torch.uint8)
    z = torch.zeros(1, 1, 1, 1)
    return ClientData(cid, x, y, x, y, z, z + 1, domain=domain)


def test_clustering_stat_separates_planted_groups_from_random():
    vecs, groups = grouped()
    planted = clustering_stat(vecs, groups)
    rand = clustering_stat(np.random.default_rng(1).standard_normal(vecs.shape), groups)
    assert planted["gap"] > 0.5 and planted["silhouette"] > 0.5
    assert abs(rand["gap"]) < 0.1 and rand["silhouette"] < 0.1
    assert planted["gap"] > rand["gap"] and planted["n_groups"] == 4


def test_clustering_stat_edge_cases():
    vecs, _ = grouped(n_groups=1, per_group=4)
    one = clustering_stat(vecs, np.zeros(4, dtype=int))
    assert np.isnan(one["between"]) and np.isnan(one["silhouette"]) and not np.isnan(one["within"])
    singles = clustering_stat(vecs, np.arange(4))
    assert np.isnan(singles["within"]) and np.isnan(singles["gap"])
    with pytest.raises(ConfigError, match="one label per client"):
        clustering_stat(vecs, [0, 1])


def test_cosine_matrix():
    vecs, _ = grouped()
    sim = cosine_matrix(vecs)
    assert sim.shape == (20, 20) and np.allclose(np.diag(sim), 1) and np.allclose(sim, sim.T)


def test_tsne_is_deterministic_and_clips_perplexity():
    vecs, _ = grouped(n_groups=2, per_group=3)
    a, b = prompt_tsne(vecs, seed=3), prompt_tsne(vecs, seed=3)
    assert a.shape == (6, 2) and np.array_equal(a, b)  # perplexity 30 clipped to 5
    with pytest.raises(ConfigError, match="K >= 3"):
        prompt_tsne(vecs[:2])


def test_groups_by_classes_and_domain():
    cs = [client(0, [1, 2]), client(1, [3, 4], domain=1), client(2, [2, 1, 2])]
    ids, names = client_groups(cs, "classes")
    assert ids.tolist() == [0, 1, 0] and names == ["1,2", "3,4"]
    with pytest.raises(ConfigError, match="domain"):
        client_groups(cs, "domain")
    ids, names = client_groups([client(0, [1], 2), client(1, [1], 0), client(2, [5], 2)], "domain")
    assert ids.tolist() == [0, 1, 0] and names == ["2", "0"]
    with pytest.raises(ConfigError, match="by="):
        client_groups(cs, "style")


def test_class_overlap_correlation():
    cs = [client(0, [0, 1]), client(1, [0, 1]), client(2, [1, 2]), client(3, [5, 6])]
    rng = np.random.default_rng(0)
    base = rng.standard_normal(32)
    # prompts that follow the class overlap: identical sets -> identical prompts, disjoint -> unrelated
    vecs = np.stack([base, base, base + 1.5 * rng.standard_normal(32), rng.standard_normal(32)])
    assert class_overlap_correlation(vecs, cs) > 0.5


def test_local_prompts_need_a_local_context():
    st = [{"ctx": torch.ones(1, 2, 3)}, {"ctx": torch.zeros(1, 2, 3)}]
    assert local_prompts(st).shape == (2, 6)
    with pytest.raises(ConfigError, match="no local"):
        local_prompts([{}, {}])


def test_on_a_fedotp_run(tmp_path):
    import matplotlib.pyplot as plt

    # five of the ten classes per client: the class sets overlap
    res = fedrepro.run(
        profile="laptop", runs_dir=str(tmp_path / "runs"), progress=False,
        method__name="fedotp", model__name="clip", model__args={"arch": "standin"},
        data__dataset="fashion_mnist_federated", data__partition="pathological",
        data__partition_args={"classes_per_client": 5, "shots": 2}, data__num_clients=4, data__max_train=None,
        data__max_test=80, train__rounds=1, train__local_epochs=1, train__batch_size=8, train__lr=0.01,
        train__eval_every=1)
    pc = run_prompt_clusters(res, seed=0)
    assert pc.cosine.shape == (4, 4) and pc.embedding.shape == (4, 2)
    assert len(pc.groups) == 4 and pc.stats["n_groups"] == len(pc.group_names)
    assert np.array_equal(pc.embedding, run_prompt_clusters(res, seed=0).embedding)
    fig = plot_prompt_clusters(pc)
    assert len(fig.axes) == 3  # matrix, colour bar, t-SNE
    from fedrepro.env.figure_check import check

    assert check(fig) == []  # group boundaries and groups named, ticks legible
    plt.close(fig)
    learnt = run_prompt_clusters(res, learnt_only=True)
    assert not np.allclose(learnt.cosine, pc.cosine)


def test_learnt_only_redraws_the_runs_initial_prompts(tmp_path):
    from fedrepro.runs.train import restore
    from fedrepro.fl.engine import init_state

    # with a vanishing step the final local prompts are the initial draws
    res = fedrepro.run(
        profile="laptop", runs_dir=str(tmp_path / "runs"), progress=False, seed=3,
        method__name="fedotp", model__name="clip", model__args={"arch": "standin"},
        data__dataset="fashion_mnist_federated", data__partition="pathological",
        data__partition_args={"classes_per_client": 5, "shots": 1}, data__num_clients=3, data__max_train=None,
        data__max_test=30, train__rounds=1, train__local_epochs=1, train__lr=1e-12, train__momentum=0.0,
        train__weight_decay=0.0, train__eval_every=1)
    method, _, state = restore(res, device="cpu")
    start = init_state(method, 3, method.ctx.cfg.seed).client_states
    other = init_state(method, 3, 4).client_states
    for s, s0, s1 in zip(state["client_states"], start, other):
        assert torch.allclose(s["ctx"], s0["ctx"], atol=1e-9)
        assert not torch.allclose(s["ctx"], s1["ctx"], atol=1e-3)
