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
