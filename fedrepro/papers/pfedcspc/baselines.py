"""The baselines of pFedCSPC's Tables II and III, and how the global ones are scored locally."""
from __future__ import annotations

# Table II's global baselines: scored Local after CE fine-tuning.
GLOBAL_BASELINES = ("moon", "feddc", "fedntd", "fedasam", "fedproc", "feddecorr", "ccvr", "fedsoup", "grace",
                    "fedetf")


def with_local_finetune(base, profile: str, epochs: int | None = None):
    """``base`` with ``train.eval_finetune_epochs``: a global method's Local score (Table II) is its
    model after ``epochs`` of CE fine-tuning on the client (default: E, the local epochs of the run,
    which pFedCSPC's own local model trains each round: equal local budgets at every profile).

    Any notebook that runs a :data:`GLOBAL_BASELINES` method runs it on this config, so the runs are
    shared (04 reuses 01's). That is sound because the fine-tuning touches only the Local score:
    evaluation draws from its own seeded stream, so the training trajectory and the global accuracy
    per round are those of ``base``."""
    ft = epochs if epochs is not None else base.train.local_epochs
    return base.replace(**{"train.eval_finetune_epochs": ft})

def moon_mu(variant: str = "default") -> float:
    """MOON's μ in pFedCSPC's setup ``variant``: the MOON paper's (Li et al., CVPR 2021, §4.1) 5 on
    CIFAR-10 (and on the laptop's Fashion-MNIST, which stands in for it) and 1 on CIFAR-100 and
    Tiny-ImageNet; 1 on VireoFood172, which MOON did not run (our choice). pFedCSPC gives none."""
    return 5.0 if variant in ("default", "beta0.1") else 1.0


def baseline_grid(methods, variant: str = "default") -> list[dict]:
    """Grid mappings (a list, concatenated) that run ``methods`` with each one's own arguments in
    setup ``variant`` (MOON's μ)."""
    methods = list(methods)
    rest = [m for m in methods if m != "moon"]
    out = [{"method.name": ["moon"], "method.args.mu": [moon_mu(variant)]}] if "moon" in methods else []
    return out + ([{"method.name": rest}] if rest else [])


# Table III's personalised baselines (no global model: scored on I_local only).
PERSONAL_BASELINES = ("lgfed", "fedperpp", "ditto", "fedfomo", "fedala")
