"""ModelMethod, the shape every model-splitting baseline shares: train.eval_finetune_epochs scores
a fine-tuned copy and leaves training alone."""
from __future__ import annotations

import fedrepro


def test_eval_finetune_scores_a_finetuned_copy_and_leaves_training_alone(tiny):
    plain = fedrepro.run(tiny(**{"train.global_eval": True}))
    ft = fedrepro.run(tiny(**{"train.global_eval": True, "train.eval_finetune_epochs": 2}))
    # Training (hence the global model) is the same; only the clients' scores change.
    assert ft.rounds["global_acc"].tolist() == plain.rounds["global_acc"].tolist()
    assert ft.rounds["acc_mean"].tolist() != plain.rounds["acc_mean"].tolist()
    assert "eval_finetune_epochs" not in tiny().hashed_dict()["train"]
