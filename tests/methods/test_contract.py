"""The contract every registered method keeps (fedrepro.methods.METHODS):

- it beats chance on the synthetic task;
- a bad hyperparameter raises a ConfigError that names it as ``method.args.<key>``: the table of
  known bad values below, and NaN and ±inf for every float hyperparameter of every method (read
  from its ``Params`` dataclass, whose bounds fedrepro.params.hp declares).

A method's own mechanism is tested beside it, in tests/methods/test_<name>.py.
"""
import dataclasses
import math
import typing

import pytest
from support import BN_CNN, setup

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.methods import METHODS

# The FedPFT family trains φ for only R_a = 1 of its 5 local epochs, so it gets more rounds; and
# MoCo's crop (down to 20% of the area) would leave about 2×2 pixels of these 8×8 images.
SMALL_IMAGE_AUG = {"aug_crop_min": 0.8, "aug_jitter": 0.1}
LEARNING_OVERRIDES = {
    "fedpft": {"train.rounds": 8},
    "fedpft_con": {"train.rounds": 8, "method.args": SMALL_IMAGE_AUG},
    "fedpft_two_stage": {"train.rounds": 8, "method.args": {**SMALL_IMAGE_AUG, "stage1_rounds": 2}},
    "fedavg_linear": {"train.rounds": 8},
    # ASAM's ρ = 0.7 (FedASAM's CIFAR setting) perturbs a 4-channel BN-CNN hard: it learns, slower.
    "fedasam": {"train.rounds": 8},
}
# Methods that prompt-tune a frozen ViT (PEP-FedPT and its baselines) run on the glyph-pretrained
# stand-in (a random frozen ViT's cls carries nothing to tune towards) at its own 28×28 input (at
# 8×8 it sees four patches); prompts and head alone learn slower, so more rounds.
PROMPT_VIT = {"model.name": "tiny_vit", "model.args": {"weights": "glyphs"}, "train.rounds": 8,
              "data.dataset_args.image_size": 28}
# Methods that tune text prompts on a frozen CLIP (FedOTP and its baselines) need class names the
# stand-in CLIP's reduced vocabulary holds (the synthetic dataset's "class_0"... are not in it), so
# they learn on few-shot Fashion-MNIST: 3 clients with 2 disjoint classes each, scored over all 10
# classes (FedOTP's pathological split), where chance is 10%.
CLIP = {"model.name": "clip", "model.args": {"arch": "standin"}, "data.dataset": "fashion_mnist_federated",
        "data.dataset_args": {}, "data.partition": "pathological",
        "data.partition_args": {"classes_per_client": 2, "shots": 8}, "data.num_clients": 3,
        "data.max_test": 200, "train.batch_size": 8, "train.lr": 0.01, "train.rounds": 3}


def learning_overrides(name):
    if getattr(METHODS.get(name), "requires_prompt_vit", False):
        return PROMPT_VIT
    if getattr(METHODS.get(name), "requires_clip", False):
        return CLIP
    return LEARNING_OVERRIDES.get(name, {})


def learning_bar(name):
    """The accuracy a method must beat: twice chance (4 synthetic classes, or CLIP's 10 over 3×)."""
    return 0.3 if getattr(METHODS.get(name), "requires_clip", False) else 0.5


@pytest.mark.parametrize("name", METHODS.names())
def test_every_method_beats_chance_on_synthetic(tiny, name):
    # 4 balanced classes: chance is 25% (10% for the CLIP methods' Fashion-MNIST).
    overrides = {"train.rounds": 4, "train.local_epochs": 2, **learning_overrides(name)}
    res = fedrepro.run(tiny(**{**BN_CNN, "method.name": name, **overrides}))
    assert res.summary["final_acc_mean"] > learning_bar(name), res.summary


# (method, method.args, the key the error must name)
BAD_ARGS = [
    ("ccvr", {"calibrate_every": -1}, "calibrate_every"), ("ccvr", {"num_virtual": 0}, "num_virtual"),
    ("ccvr", {"apply": "always"}, "apply"), ("ccvr", {"calib_lr": 0}, "calib_lr"),
    ("ditto", {"lam": -0.1}, "lam"), ("ditto", {"personal_epochs": 1.5}, "personal_epochs"),
    ("fedala", {"rand_percent": 0}, "rand_percent"), ("fedala", {"layer_idx": 0}, "layer_idx"),
    ("fedala", {"layer_unit": "block"}, "layer_unit"), ("fedala", {"eta": 0.0}, "eta"),
    ("fedala", {"num_pre_loss": 0}, "num_pre_loss"), ("fedala", {"eval_model": "global"}, "eval_model"),
    ("fedamp", {"attention": "dot"}, "attention"), ("fedamp", {"alpha_k": 0}, "alpha_k"),
    ("fedamp", {"self_weight": 2.0}, "self_weight"),
    ("fedasam", {"rho": -0.1}, "rho"), ("fedasam", {"eta": -1}, "eta"), ("fedasam", {"adaptive": "yes"}, "adaptive"),
    ("fedasam", {"scale": "biases"}, "scale"),
    ("fedavg_linear", {"linear_init": "zeros"}, "linear_init"),
    ("fedpr", {"null_fraction": 1.5}, "null_fraction"), ("fedpr", {"kept_energy": 0}, "kept_energy"),
    ("fedpr", {"null_scope": "model"}, "null_scope"), ("fedpr", {"blocks": [0, 1]}, "blocks"),
    ("sgpt", {"n_groups": 0}, "n_groups"), ("sgpt", {"group_blocks": [1, 99]}, "group_blocks"),
    ("sgpt", {"query": "last"}, "query"), ("sgpt", {"key_momentum": 1.5}, "key_momentum"),
    ("fedvpt", {"n_prompts": 0}, "n_prompts"), ("fedvpt", {"prior_logits": "add"}, "prior_logits"),
    ("fedvpt", {"grad_clip": 0}, "grad_clip"), ("fedvpt", {"lr_decay": 1.5}, "lr_decay"),
    ("fedvpt", {"fedavg_weighting": "clients"}, "fedavg_weighting"),
    ("fedvpt_d", {"blocks": [0, 1]}, "blocks"), ("fedvpt_d", {"blocks": [1, 99]}, "blocks"),
    ("head_tuning", {"grad_clip": -1}, "grad_clip"), ("p_pt", {"n_prompts": -1}, "n_prompts"),
    ("fedcac", {"beta": 0}, "beta"), ("fedcac", {"tau": 1.5}, "tau"), ("fedcac", {"buffers": "x"}, "buffers"),
    ("feddc", {"alpha": -0.01}, "alpha"), ("feddc", {"correction_update": "none"}, "correction_update"),
    ("feddc", {"step_count": "adam"}, "step_count"), ("feddc", {"weighting": "loss"}, "weighting"),
    ("feddecorr", {"beta": -0.1}, "beta"), ("feddecorr", {"loss_form": "barlow"}, "loss_form"),
    ("fedetf", {"projection": "mlp"}, "projection"), ("fedetf", {"beta_init": 0}, "beta_init"),
    ("fedetf", {"personalize": "x"}, "personalize"), ("fedetf", {"pers_cycles": -1}, "pers_cycles"),
    ("fedfomo", {"num_models": 0}, "num_models"), ("fedfomo", {"epsilon": 1.5}, "epsilon"),
    ("fedfomo", {"epsilon_decay": -0.1}, "epsilon_decay"), ("fedfomo", {"val_fraction": 1.0}, "val_fraction"),
    ("fedfomo", {"norm": "linf"}, "norm"),
    ("fedntd", {"tau": 0}, "tau"), ("fedntd", {"beta": "1"}, "beta"), ("fedntd", {"t2_scaling": 1}, "t2_scaling"),
    ("fedntd", {"teacher_mode": "frozen"}, "teacher_mode"),
    ("fedperpp", {"reg": "l1"}, "reg"), ("fedperpp", {"mu": -1.0}, "mu"),
    ("fedpft", {"ftm_heads": 3}, "ftm_heads"),  # does not divide m = 64: checked when the model is built
    ("fedpft", {"ftm_residual": "post"}, "ftm_residual"),
    ("fedpft", {"ftm_init": "ones"}, "ftm_init"),
    ("fedpft", {"r_f": 0, "r_a": 0}, "r_f"),
    ("fedpft", {"n_prompts": 0}, "n_prompts"),
    ("fedpft_con", {"moco_momentum": 1.5}, "moco_momentum"),
    ("fedpft_con", {"con_prompts": "kappa", "use_prompts": False}, "con_prompts"),
    ("fedproc", {"alpha_schedule": "cosine"}, "alpha_schedule"), ("fedproc", {"alpha": 1.5}, "alpha"),
    ("fedproc", {"similarity": "l2"}, "similarity"), ("fedproc", {"temperature": 0}, "temperature"),
    ("fedrod", {"personal_head": "hyper"}, "personal_head"), ("fedrod", {"generic_loss": "ldam"}, "generic_loss"),
    ("fedrod", {"prior_smoothing": -1}, "prior_smoothing"),
    ("fedsoup", {"soup_start": 1.5}, "soup_start"), ("fedsoup", {"val_fraction": 0.0}, "val_fraction"),
    ("fedsoup", {"eval_model": "mine"}, "eval_model"),
    ("grace", {"align_type": "mmd"}, "align_type"), ("grace", {"align_weight": -1}, "align_weight"),
    ("grace", {"similarity": "l2"}, "similarity"), ("grace", {"server_lr": 0}, "server_lr"),
    ("lgfed", {"global_part": "body"}, "global_part"), ("lgfed", {"fedavg_warmup_rounds": -1}, "fedavg_warmup_rounds"),
    ("moon", {"mu": -1}, "mu"), ("moon", {"temperature": 0}, "temperature"),
    ("moon", {"anchor_mode": "frozen"}, "anchor_mode"),
    ("pep_fedpt", {"tau": 0}, "tau"), ("pep_fedpt", {"ccmp_mode": "stack"}, "ccmp_mode"),
    ("pep_fedpt", {"ccmp_blocks": [4, 4]}, "ccmp_blocks"), ("pep_fedpt", {"proto_momentum": 1.5}, "proto_momentum"),
    ("pep_fedpt", {"proto_period": 0}, "proto_period"), ("pep_fedpt", {"warm_start": "zeros"}, "warm_start"),
    ("pfedcspc", {"clusters": 0}, "clusters"), ("pfedcspc", {"ratio": 1.5}, "ratio"),
    ("pfedcspc", {"prototypes": "mean"}, "prototypes"), ("pfedcspc", {"kp_weight": 2}, "kp_weight"),
    ("pfedcspc", {"base": "scaffold"}, "base"), ("pfedcspc", {"align_weights": [1, 1]}, "align_weights"),
    ("pfedcspc", {"tau_p": 0}, "tau_p"),
    ("pfedpg", {"n_base": 0}, "n_base"), ("pfedpg", {"head": "global"}, "head"),
    ("pfedpg", {"server_lr": 0}, "server_lr"), ("pfedpg", {"eval_prompt": "local"}, "eval_prompt"),
    ("pfedgate", {"sparsity": 1.0}, "sparsity"), ("pfedgate", {"gate_values": "x"}, "gate_values"),
    ("pfedpt", {"prompt_bn": "x"}, "prompt_bn"), ("pfedpt", {"prompt_size": 0}, "prompt_size"),
    ("pfedsd", {"kd_weight": -0.1}, "kd_weight"), ("pfedsd", {"temperature": 0}, "temperature"),
    ("pfedsd", {"teacher_mode": "frozen"}, "teacher_mode"),
    # The CLIP prompt methods (the shared ClipPromptParams, then each method's own).
    ("promptfl", {"n_ctx": 0}, "n_ctx"), ("promptfl", {"class_order": "alphabetical"}, "class_order"),
    ("coop", {"optimizer_scope": "global"}, "optimizer_scope"), ("coop", {"init_std": 0}, "init_std"),
    ("zeroshot_clip", {"template": "a photo"}, "template"),
    ("fedotp", {"ot": "sinkhorn"}, "ot"), ("fedotp", {"gamma": 1.5}, "gamma"),
    ("fedotp", {"prompts": "both"}, "prompts"),
    ("promptfl_ft", {"ft_epochs": 0}, "ft_epochs"), ("promptfl_ft", {"ft_epochs": 1.5}, "ft_epochs"),
    ("promptfl_fedprox", {"mu": -0.5}, "mu"), ("promptfl_fedprox", {"prox_grad": "no"}, "prox_grad"),
    ("promptfl_fedper", {"n_personal": 0}, "n_personal"),
    ("promptfl_fedper", {"n_personal": 99}, "n_personal"),  # >= L: checked when the prompt is built
    ("promptfl_fedamp", {"attention": "dot"}, "attention"), ("promptfl_fedamp", {"self_weight": 2.0}, "self_weight"),
    ("promptfl_fedamp", {"start_from": "global"}, "start_from"),
    ("pfedprompt", {"alpha": -1.0}, "alpha"), ("pfedprompt", {"beta": "5.5"}, "beta"),
]


def _key_named(key):
    return rf"method\.args\.{key}\b"


@pytest.mark.parametrize("name, args, key", [pytest.param(*case, id=f"{case[0]}-{case[2]}") for case in BAD_ARGS])
def test_bad_hyperparameters_name_the_key(tiny, name, args, key):
    with pytest.raises(ConfigError, match=_key_named(key)):
        METHODS.get(name).parse_params(args)
        # Checks that need the model (FedPFT's heads must divide its feature dimension) run when
        # the method is built.
        model = {k: v for k, v in learning_overrides(name).items() if k.startswith(("model.", "data."))}
        setup(tiny(**{"method.name": name, "method.args": args, **model}))


def _float_fields(params_cls):
    """The fields of a Params dataclass annotated ``float`` or ``float | None``."""
    hints = typing.get_type_hints(params_cls)
    out = []
    for f in dataclasses.fields(params_cls):
        tp = hints.get(f.name)
        if tp is float or float in typing.get_args(tp):
            out.append(f.name)
    return out


NON_FINITE = [pytest.param(name, field, value, id=f"{name}-{field}-{value}")
              for name in METHODS.names() for field in _float_fields(METHODS.get(name).Params)
              for value in (math.nan, math.inf, -math.inf)]


@pytest.mark.parametrize("name, field, value", NON_FINITE)
def test_non_finite_float_hyperparameters_name_the_key(name, field, value):
    with pytest.raises(ConfigError, match=_key_named(field)):
        METHODS.get(name).parse_params({field: value})

