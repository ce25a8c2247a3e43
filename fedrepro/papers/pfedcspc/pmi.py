"""pFedCSPC's PMI analyses (pFedCSPC (TNNLS) Fig. 10) on a finished run's final state.

- :func:`pmi_start`: per client, the local test accuracy of the PMI initial model M_k^p
  (personalised encoder, calibrated global head) and of the global model, both *before* any local
  training (Fig. 10a);
- :func:`pmi_finetune`: per client, E epochs of local CE training from each init, with the
  per-epoch training loss and the final local test accuracy (Fig. 10b, c);
- :func:`pmi_weight_stats`: how closely the final round's PMI weights follow how well each
  client's model classifies client k's held-out data (what Fig. 9 and §V-E2 describe: weight goes to
  the clients whose models suit client k), and two readings of ours: how closely they follow the
  similarity of the clients' label histograms, and how much of them is which client they come from;
- :func:`weight_spread`, :func:`pmi_spread`: how concentrated the weights are (their entropy as an
  effective number of source clients, the self-weight, the largest weight), for a table's runs
  (:func:`with_pmi_spread`);
- :func:`pmi_start_table`: all of these summarised per run of a ``run_grid`` table, the input of the
  ``pfedcspc.pmi_*`` claims;
- :func:`select_tau_p`: the PMI temperature chosen on the validation sweep (rule: :data:`TAU_P_RULE`),
  :func:`tau_p_sweep`: the sweep summarised per τ_p.

Both initial models are scored by their network prediction (no knowledge-based fusion), so the
comparison isolates the encoder PMI changes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ...analysis.alignment import label_similarity
from ...analysis.embedding import analysis_generator
from ...fl.local import evaluate_model, make_sgd, train_epochs
from ...runs.store import RunResult
from ...runs.train import restore
from ...execute.tuning import MIN_VALIDATION_IMAGES, SearchDecision, decide
from ...methods.pfedcspc import MODEL, PFedCSPCParams
from .. import setup
from .metrics import by_seed_and_client, local_units, paired_se


def _inits(method, shared: dict, cid: int) -> dict[str, dict]:
    return {"pmi": method.initial_model(shared, cid), "global": method._sub(shared, "g.")}


def pmi_start(result) -> pd.DataFrame:
    """One row per client: ``pmi_init_acc``, ``global_init_acc`` (local test, before training)."""
    method, clients, state = restore(result, "cpu")
    shared = state["shared"]
    rows = []
    for c in clients:
        accs = {k: evaluate_model(method._load(sd), c).acc for k, sd in _inits(method, shared, c.cid).items()}
        rows.append({"client": c.cid, "pmi_init_acc": accs["pmi"], "global_init_acc": accs["global"],
                     "n_test": c.num_test})
    return pd.DataFrame(rows)


def pmi_finetune(result, epochs: int | None = None, seed: int = 0) -> pd.DataFrame:
    """One row per (client, init, epoch): the epoch's mean training loss and, after the epoch, the
    local test accuracy. Training follows the run's local optimiser (``train.*``)."""
    method, clients, state = restore(result, "cpu")
    t = method.ctx.cfg.train
    epochs = t.local_epochs if epochs is None else epochs
    shared = state["shared"]
    rows = []
    for c in clients:
        for name, sd in _inits(method, shared, c.cid).items():
            net = method._load(sd)
            opt = make_sgd(net.parameters(), t.lr, t.momentum, t.weight_decay)
            gen = analysis_generator(seed, "pmi_finetune", c.cid)
            for e in range(1, epochs + 1):
                stats = train_epochs(net, c, opt, 1, t.batch_size, gen)
                rows.append({"client": c.cid, "init": name, "epoch": e, "train_loss": stats.loss,
                             "test_acc": evaluate_model(net, c).acc})
    return pd.DataFrame(rows)


def pmi_weight_stats(result) -> dict[str, float]:
    """Readings of the final round's PMI weights p_k^k' over ordered client pairs k ≠ k':

    - ``weight_fit_corr``: :func:`weight_fit_stats` against :func:`model_fit` (how well each client's
      final model classifies client k's test split), what Fig. 9 and §V-E2 describe;
    - ``weight_label_corr`` (ours): their Pearson correlation with the cosine similarity of the two
      clients' label histograms, which the paper does not claim (a diagnostic);
    - ``weight_source_share`` (ours): the share of their variance that lies between source clients
      k' (the column means): near 1 when a client's head draws the same weight from every client,
      whoever k is, so the weights rank heads rather than match label distributions;
    - the weights' spread (:func:`weight_spread`)."""
    method, clients, state = restore(result, "cpu")
    w = state["server_state"]["pmi_weights"].double()
    order = state["server_state"]["pmi_clients"].tolist()
    fit = model_fit(method, clients, state, order)
    return {**weight_fit_stats(w, fit), **weight_stats(w, label_similarity(clients)[order][:, order].double()),
            **weight_spread(w)}


def model_fit(method, clients, state: dict, order: list[int]) -> torch.Tensor:
    """``fit[i, j]``: the test accuracy on client ``order[i]``'s own test split (held out of its
    training) of client ``order[j]``'s model after the final round's local training, M_k' = E_k' ⊙ H_k'
    ⊙ F_k', the models whose prototype losses set that round's PMI weights (Eq. 4)."""
    by_cid = {c.cid: c for c in clients}
    fit = torch.zeros(len(order), len(order), dtype=torch.float64)
    for j, src in enumerate(order):
        net = method._load(method._sub(state["client_states"][src], MODEL))
        for i, dst in enumerate(order):
            fit[i, j] = evaluate_model(net, by_cid[dst]).acc
    return fit


def _ranks(v: torch.Tensor) -> torch.Tensor:
    return torch.tensor(pd.Series(v.tolist()).rank().to_numpy(), dtype=torch.float64)


def weight_fit_stats(w: torch.Tensor, fit: torch.Tensor) -> dict[str, float]:
    """``weight_fit_corr``: per client k (row), Spearman's rank correlation over the other clients
    k' ≠ k of the weight p_k^k' with ``fit[k, k']`` (how well M_k' classifies client k's held-out
    data), averaged over the rows where both vary. Eq. 4 sets p_k^k' = softmax(−L_sup(U_k; M_k')/τ_p),
    from the loss of M_k''s head on client k's *prototypes* (features of client k's training images
    through client k's own encoder), so this is close to a mechanism check; it holds when that
    ranking carries over to client k's unseen images through M_k''s own encoder. The diagonal (a
    model on its own client, high in both for a trivial reason) is left out."""
    n = len(w)
    rhos = []
    for k in range(n):
        others = [j for j in range(n) if j != k]
        ra, rb = _ranks(w[k, others].double()), _ranks(fit[k, others].double())
        if len(others) < 2 or bool((ra == ra[0]).all()) or bool((rb == rb[0]).all()):
            continue  # a row where all weights (or all fits) tie ranks nothing
        rhos.append(float(torch.corrcoef(torch.stack([ra, rb]))[0, 1]))
    return {"weight_fit_corr": float(np.mean(rhos)) if rhos else float("nan")}


def weight_spread(w: torch.Tensor) -> dict[str, float]:
    """How concentrated PMI's weights are, mean over the rows (clients k) of ``w``:
    ``pmi_effective_sources`` = exp(entropy of row k), the number of equally weighted clients with the
    same entropy (N for uniform weights, 1 for one client); ``pmi_self_weight`` = p_k^k;
    ``pmi_max_weight`` = the largest p_k^k'."""
    w = w.double()
    entropy = -(w * torch.log(w.clamp_min(1e-300))).sum(1)
    return {"pmi_effective_sources": float(torch.exp(entropy).mean()), "pmi_self_weight": float(w.diagonal().mean()),
            "pmi_max_weight": float(w.max(1).values.mean())}


SPREAD = ("pmi_effective_sources", "pmi_self_weight", "pmi_max_weight")
PMI_TAU_P = "pmi_tau_p"  # the τ_p a run's PMI used (NaN without PMI)


def pmi_spread(path) -> dict[str, float]:
    """:func:`weight_spread` of a stored run's final PMI weights, and its τ_p (:data:`PMI_TAU_P`); NaN
    for a run without them (another method, PMI off, or a run that diverged before it stored its
    state)."""
    nan = {k: float("nan") for k in (*SPREAD, PMI_TAU_P)}
    res = path if isinstance(path, RunResult) else RunResult(path)
    cfg = res.config
    if cfg.method.name != "pfedcspc" or not (res.path / "final_state.pt").exists():
        return nan
    w = res.final_state()["server_state"].get("pmi_weights")
    if w is None or not w.numel():
        return nan
    return {**weight_spread(w), PMI_TAU_P: float(PFedCSPCParams(**cfg.method.args).tau_p)}


def with_pmi_spread(table: pd.DataFrame) -> pd.DataFrame:
    """A ``run_grid`` table with :data:`SPREAD`'s columns and :data:`PMI_TAU_P` (:func:`pmi_spread` of
    each run), so that a table prints each PMI row's τ_p and how many clients its encoders are
    effectively drawn from beside its score."""
    spread = pd.DataFrame([pmi_spread(p) for p in table["path"]], index=table.index)
    return pd.concat([table.drop(columns=[c for c in spread.columns if c in table.columns]), spread], axis=1)


def weight_stats(w: torch.Tensor, sim: torch.Tensor) -> dict[str, float]:
    """:func:`pmi_weight_stats` of a weight matrix ``w`` (row k: client k's weights over k') and the
    label similarity ``sim`` of the same clients in the same order."""
    n = len(w)
    off = ~torch.eye(n, dtype=torch.bool)
    values = w[off]
    source = torch.arange(n).expand(n, -1)[off]  # k' of each off-diagonal entry
    means = torch.zeros(n, dtype=w.dtype).index_add_(0, source, values) / (n - 1)
    total = float(((values - values.mean()) ** 2).sum())
    between = float(((means[source] - values.mean()) ** 2).sum())
    return {"weight_label_corr": float(torch.corrcoef(torch.stack([values, sim[off].to(w.dtype)]))[0, 1]),
            "weight_source_share": between / total if total > 0 else float("nan")}


def pmi_start_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per run of a grid table (pFedCSPC runs): mean over clients of both inits' accuracy, the
    share of clients for which PMI starts higher, both inits' mean training loss in the first
    local epoch (Fig. 10c's start), and the PMI weights' readings (:func:`pmi_weight_stats`)."""
    rows = []
    for _, row in table.iterrows():
        df = pmi_start(row["path"])
        first = pmi_finetune(row["path"], epochs=1).groupby("init")["train_loss"].mean()
        rows.append({**{k: row[k] for k in table.columns if k not in ("path",)},
                     "pmi_init_acc": float(df["pmi_init_acc"].mean()),
                     "global_init_acc": float(df["global_init_acc"].mean()),
                     "pmi_better_share": float((df["pmi_init_acc"] > df["global_init_acc"]).mean()),
                     "pmi_first_epoch_loss": float(first["pmi"]), "global_first_epoch_loss": float(first["global"]),
                     **pmi_weight_stats(row["path"]), "path": row["path"]})
    return pd.DataFrame(rows)


TAU_P = "method.args.tau_p"
VALIDATION_METRIC = "final_i_local_mean"
# pFedCSPC (TNNLS) gives no τ_p (Eq. 4). PMI serves the personalised objective (§IV-B1), so the rule
# reads the personalised models' accuracy, on validation splits only, at the tuning seeds (which no
# claim reads), and decides only what those splits can tell apart: the rule of every search
# (fedrepro.execute.tuning.decide), with the method's neutral τ_p where the candidates are within noise.
NEUTRAL_TAU_P = PFedCSPCParams().tau_p
RULE_NEUTRAL = f"within noise: the neutral τ_p = {NEUTRAL_TAU_P:g}"
TAU_P_RULE = ("τ_p = the grid value with the highest mean over the tuning seeds (which no claim reads) of the "
              "final round's I_local on the clients' validation splits (held out of the training images; a "
              "diverged run scores 0), if it was scored on at least "
              f"{MIN_VALIDATION_IMAGES} validation images and beats every other τ_p by more than the standard error "
              "of their difference (paired by seed and client); otherwise, of the τ_p it does not beat, the neutral "
              f"τ_p = {NEUTRAL_TAU_P:g} (the method's default, the least selective weighting) if among them, else "
              "their median; a tie of the means goes to the τ_p nearest the neutral one")


def select_tau_p(validation: pd.DataFrame, metric: str = VALIDATION_METRIC, units_of=None) -> SearchDecision:
    """:data:`TAU_P_RULE` on the rows of the ``pmi_tau_p_validation`` table (one per τ_p and tuning
    seed, with its run's ``path``): the decision (``.rate`` is the τ_p; its margin over the runner-up,
    the margin's standard error and the rule that chose). ``units_of(row)``: ``(per-client I_local,
    validation images)`` of a row (default: read from its stored run, :func:`.metrics.local_units`)."""
    for col in (TAU_P, metric, "seed"):
        if col not in validation:
            raise ValueError(f"select_tau_p: column {col!r} absent; valid input: the pmi_tau_p_validation table")
    if validation.empty:
        raise ValueError("select_tau_p: no validation runs")
    units_of = units_of or (lambda row: local_units(RunResult(row["path"])))
    scores, parts, images = {}, {}, {}
    for tau, rows in validation.groupby(TAU_P):
        tau = float(tau)
        scores[tau] = float(rows[metric].fillna(0.0).mean())
        for _, row in rows.iterrows():
            values, n = units_of(row)
            parts.setdefault(tau, []).append(by_seed_and_client(values, row["seed"]))
            images[tau] = images.get(tau, 0) + int(n)
    units = {tau: pd.concat(p) if p else pd.Series(dtype=float) for tau, p in parts.items()}
    ranked = sorted(scores, key=lambda t: (-scores[t], abs(t - NEUTRAL_TAU_P)))

    seeds = sorted(int(x) for x in validation["seed"].unique())
    return decide(scores, ranked, max(images.values(), default=0), lambda a, b: paired_se(units[a], units[b]),
                  NEUTRAL_TAU_P, RULE_NEUTRAL, len(units[ranked[0]]), seeds)


def setup_tau_p(profile: str) -> float:
    """The τ_p that the profile's pFedCSPC runs use: its setup's method arguments
    (:data:`fedrepro.papers.pfedcspc.setup.TAU_P`) over the method's defaults."""
    return float(PFedCSPCParams(**setup("pfedcspc", profile).method.args).tau_p)


def tau_p_sweep(validation: pd.DataFrame, test: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per τ_p (mean over seeds): the validation runs' I_local and global accuracy, how many clients
    their PMI weights draw on, and the weights' rank correlation with the models' fit (and, ours,
    their correlation with label similarity); with ``test`` (the ``pmi_tau_p`` table) the same
    columns of the test-split runs, which the choice never reads, and ``chosen`` marking the
    :func:`select_tau_p` pick."""
    def summary(t: pd.DataFrame, tag: str) -> pd.DataFrame:
        stats = pd.DataFrame([pmi_weight_stats(p) for p in t["path"]], index=t.index)
        r = pd.concat([t.drop(columns=[c for c in stats.columns if c in t.columns]), stats], axis=1)
        cols = {VALIDATION_METRIC: f"{tag} I_local", "final_global_acc": f"{tag} ACC_global",
                "pmi_effective_sources": f"{tag} sources", "weight_fit_corr": f"{tag} ρ(weights, fit)",
                "weight_label_corr": f"{tag} r(weights, labels) (ours)"}
        return r.groupby(TAU_P)[list(cols)].mean().rename(columns=cols)

    out = summary(validation, "validation")
    if test is not None:
        out = out.join(summary(test, "test"))
    out["chosen"] = out.index == select_tau_p(validation).rate
    return out.sort_index(ascending=False)
