"""The baselines of pFedCSPC's Tables II and III, and how the global ones are scored locally."""
from __future__ import annotations

# Table II's global baselines: scored Local after CE fine-tuning.
GLOBAL_BASELINES = ("moon", "feddc", "fedntd", "fedasam", "fedproc", "feddecorr", "ccvr", "fedsoup", "grace",
                    "fedetf")


def with_local_finetune(base, profile: str, epochs: int | None = None):
    """``base`` with ``train.eval_finetune_epochs``: a global method's Local score (Table II) is its
    model after ``epochs`` of CE fine-tuning on the client (default: E at the paper profile, 1 at
    laptop and smoke, where E local epochs would cost more than the run itself).

    Any notebook that runs a :data:`GLOBAL_BASELINES` method runs it on this config, so the runs are
    shared (04 reuses 01's). That is sound because the fine-tuning touches only the Local score:
    evaluation draws from its own seeded stream, so the training trajectory and the global accuracy
    per round are those of ``base``."""
    ft = epochs if epochs is not None else (base.train.local_epochs if profile == "paper" else 1)
    return base.replace(**{"train.eval_finetune_epochs": ft})

# Table III's personalised baselines (no global model: scored on I_local only).
PERSONAL_BASELINES = ("lgfed", "fedperpp", "ditto", "fedfomo", "fedala")
