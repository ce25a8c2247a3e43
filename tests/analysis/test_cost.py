"""Communication and time cost: uploaded parameters by module group, time per round, and the
FedPFT communication table (ICLR App. N, Table 15)."""
import pytest
import torch
from support import RESNET, setup

from fedrepro.analysis import (
    time_per_round,
    upload_params,
)
from fedrepro.analysis.cost import communication_cost, module_param_counts
from fedrepro.runs.train import restore
from fedrepro.models import count_params
from fedrepro.models.ftm import ftm_param_count

from ..methods.pft_support import CON_SMALL, update


def test_upload_params_counts_the_shared_tensors(runs):
    for name, res in runs.items():
        method, _, state = restore(res, "cpu")
        counts = upload_params(method, state["shared"])
        assert sum(counts.values()) == sum(t.numel() for t in state["shared"].values())
        assert counts == upload_params(method)  # a fresh init has the same shapes
        model = method.model
        if name == "fedavg":
            assert counts["head"] == sum(p.numel() for p in model.head.parameters())
        else:
            assert "head" not in counts  # FedPer's head never leaves the client
        floats = upload_params(method, state["shared"], float_only=True)
        n_bn_counters = sum(1 for k in state["shared"] if k.endswith("num_batches_tracked"))
        assert n_bn_counters and sum(floats.values()) == sum(counts.values()) - n_bn_counters


def test_upload_params_uses_a_methods_own_module_groups():
    class Grouped:
        def module_groups(self):
            return {"phi": ["features"], "tau": ["ftm.attn"]}

    shared = {"features.w": torch.zeros(3, 4), "ftm.attn.w": torch.zeros(5), "ftm.norm.w": torch.zeros(2),
              "head.w": torch.zeros(7)}
    assert upload_params(Grouped(), shared) == {"phi": 12, "tau": 5, "ftm": 2, "head": 7}


def test_time_per_round(runs):
    t = time_per_round(runs["fedavg"])
    assert t["rounds"] == 3 and t["train_s"] > 0 and t["eval_s"] > 0
    assert t["train_s_per_client"] == pytest.approx(t["train_s"] / 4)
    assert time_per_round(runs["fedavg"], skip_first=1)["rounds"] == 2


def test_communication_table_matches_the_papers_parameter_counts():
    """FedPFT ICLR App. N Table 15 / arXiv App. I, as we read them: φ 1,232,704 (ResNet-8, 1.24M);
    h_κ = 100·256 + 100; h_ρ = 256·128 + 128; τ = 4m² + 4m plus our pre-norm LayerNorm's 2m."""
    import fedrepro
    from fedrepro.analysis.cost import communication_table

    cfg = fedrepro.make_config("paper", model__name="resnet8", model__args={"width": 64})
    t = communication_table({"ResNet-8": cfg}, ["fedpft", "fedpft_con"], num_classes=100).set_index("method.name")
    m = 256
    assert t.loc["fedavg", "phi"] == 1_232_704 and t.loc["fedavg", "h_kappa"] == 100 * m + 100
    assert t.loc["fedpft", "tau"] == 4 * m * m + 4 * m + 2 * m
    assert t.loc["fedpft_con", "h_rho"] == m * 128 + 128
    assert t.loc["fedavg", "overhead_pct"] == 0
    expected = 100 * (t.loc["fedpft", "total"] / t.loc["fedavg", "total"] - 1)
    assert abs(t.loc["fedpft", "overhead_pct"] - expected) < 1e-9


# --- communication (ICLR App. N, Table 15) ------------------------------------------------------
def test_communication_cost_counts_the_real_parameters(tiny):
    method, clients, st = setup(tiny(**RESNET, **{"method.name": "fedpft_con", "method.args": CON_SMALL}))
    net, m = method.model, method.model.feature_dim
    cost = communication_cost(method)
    assert cost["phi"] == count_params(net.features)
    assert cost["tau"] == count_params(net.ftm) == ftm_param_count(m)
    assert cost["h_kappa"] == count_params(net.head) == m * net.num_classes + net.num_classes
    assert cost["h_rho"] == m * 8 + 8
    assert cost["total"] == cost["phi"] + cost["tau"] + cost["h_kappa"] + cost["h_rho"]
    upd = update(method, st, clients)
    assert communication_cost(method, upd.upload, include_buffers=True)["total"] == \
        sum(v.numel() for v in upd.upload.values())
    sizes = module_param_counts(method)
    assert sizes["prompts_kappa"] == 10 * m and sizes["prompts_rho"] == 4 * m  # counted, never uploaded
    assert {k: sizes[k] for k in ("phi", "tau", "h_kappa", "h_rho")} == {k: cost[k] for k in sizes if k in cost}
    per_cls = setup(tiny(**{"method.name": "fedpft", "method.args.personal_classifier": True}))[0]
    assert set(communication_cost(per_cls)) == {"phi", "tau", "total"}
