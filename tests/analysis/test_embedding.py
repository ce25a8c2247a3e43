"""Features for t-SNE (FedPFT's feature plots): extraction, the embedding and its plot."""
import numpy as np

from fedrepro.analysis import (
    extract_features,
    plot_tsne,
    tsne_embed,
)


def test_tsne_features_embedding_and_plot(runs):
    res = runs["fedavg"]
    feats, labels, owners = extract_features(res, device="cpu")
    n_test = int(res.final_clients()["n_test"].sum())
    assert feats.shape == (n_test, 16) and labels.shape == owners.shape == (n_test,)
    capped, _, cap_owners = extract_features(res, max_per_client=5, device="cpu")
    assert len(capped) <= 5 * len(np.unique(owners)) and np.bincount(cap_owners).max() <= 5
    emb = tsne_embed(feats, seed=0, perplexity=10)
    assert emb.shape == (n_test, 2) and np.isfinite(emb).all()
    assert np.allclose(emb, tsne_embed(feats, seed=0, perplexity=10))
    fig = plot_tsne(emb, labels, owners, centroids=True, title="FedAvg")
    assert len(fig.axes) == 2
    fig.canvas.draw()  # renders under Agg
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_one_panel_per_method_and_the_label_panel():
    """FedPFT (ICLR) Fig. 4 draws one class-coloured panel per method beside panel (a), the
    client × class counts in the same markers; the counts are the embedded points'."""
    import matplotlib.pyplot as plt
    import pytest

    from fedrepro.analysis import plot_label_panel
    from fedrepro.errors import ConfigError

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 60)
    owners = np.repeat(np.arange(3), 20)
    fig, (a, b) = plt.subplots(1, 2)
    plot_tsne(rng.normal(size=(60, 2)), labels, owners, axes=b)
    assert len(fig.axes) == 2 and b.get_title().startswith("coloured by class")
    plot_label_panel(labels, owners, ax=a)
    sizes = np.concatenate([c.get_sizes() for c in a.collections])
    counts = [((owners == k) & (labels == c)).sum() for k in range(3) for c in range(4)]
    assert len(sizes) == sum(n > 0 for n in counts)
    assert sizes.max() == pytest.approx(250.0)
    assert sorted(sizes) == pytest.approx(sorted(250.0 * n / max(counts) for n in counts if n))
    with pytest.raises(ConfigError, match="labels and clients"):
        plot_label_panel(labels, owners[:10], ax=a)
    plt.close(fig)


def test_tsne_figures_pass_the_figure_check():
    """Colour = class and marker = client: every set of points is keyed to the class legend and the
    client legend that explain it, in each form a notebook draws (two panels, one panel with its own
    keys, a grid keyed once by tsne_legend beside the label panel)."""
    import matplotlib.pyplot as plt

    from fedrepro.analysis import plot_label_panel, tsne_legend
    from fedrepro.env.figure_check import check

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, 60)
    owners = np.repeat(np.arange(3), 20)
    emb = rng.normal(size=(60, 2))
    names = ["cat", "dog", "cow", "owl"]
    assert check(plot_tsne(emb, labels, owners, centroids=True, class_names=names)) == []
    fig, ax = plt.subplots()
    plot_tsne(emb, labels, owners, axes=ax)
    assert check(fig) == []
    fig, (a, b, c) = plt.subplots(1, 3)
    plot_label_panel(labels, owners, ax=a, class_names=names)
    for axes in (b, c):
        plot_tsne(emb, labels, owners, axes=axes, class_names=names, legend=False)
    assert any(p.rule == "legend" for p in check(fig))
    tsne_legend(fig, labels, owners, class_names=names)
    assert check(fig) == []
    far = emb.copy()
    far[0] = (400.0, 0.0)  # one point far off: a note says so
    assert check(plot_tsne(far, labels, owners)) == []
    plt.close("all")
