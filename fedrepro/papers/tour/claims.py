"""The tour notebook's claims (notebooks/00_tour.ipynb), on the Local / FedAvg / FedPer grid.

They restate the standard observation of the personalised-FL literature, visible in the Local and
FedAvg rows of FedPFT's CIFAR-10 table (ICLR Table 8 / arXiv Table 7): under strong label skew each
client's own model beats the single global model, and near IID the global model wins because it
sees more data.
"""
from __future__ import annotations

from ...claims import arms
from ...claims.core import Claim, compare, register_claim

ALPHA = "data.partition_args.alpha"
LOCAL_MARGIN = 0.05  # "≫": at least 5 accuracy points


def _at(method: str, alpha: float) -> dict:
    return {"method.name": method, ALPHA: alpha}


register_claim(Claim(
    id="tour.local_beats_fedavg_skewed", paper="tour",
    source="FedPFT ICLR Table 8 / arXiv Table 7 (C10 α=0.1: Local 81.9 vs FedAvg 60.4)",
    statement="Local ≫ FedAvg at Dirichlet α = 0.1 (by > 5 points, best-round mean client accuracy)",
    check=lambda r: compare(r, _at("local", 0.1), _at("fedavg", 0.1), margin=LOCAL_MARGIN,
                            label_a="Local", label_b="FedAvg"),
    arms=(arms.Rows(_at("local", 0.1), _at("fedavg", 0.1)),),
))

register_claim(Claim(
    id="tour.fedavg_beats_local_iid", paper="tour",
    source="FedPFT ICLR Table 8 / arXiv Table 7 (C10 α=1.0: FedAvg 60.9 vs Local 52.2)",
    statement="FedAvg > Local near IID (Dirichlet α = 10)",
    check=lambda r: compare(r, _at("fedavg", 10.0), _at("local", 10.0), label_a="FedAvg", label_b="Local"),
    arms=(arms.Rows(_at("fedavg", 10.0), _at("local", 10.0)),),
))
