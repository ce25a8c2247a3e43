"""Typed, validated run configuration with three profiles: ``smoke``, ``laptop`` (default), ``paper``.

A :class:`RunConfig` is built from a profile plus overrides (a nested dict, dotted keys such as
``"train.rounds"``, a YAML file, or CLI ``--set key=value`` pairs). Unknown keys and invalid values
raise :class:`~fedrepro.errors.ConfigError` naming the key and what would be valid. The resolved
config is hashed to key the results store (:mod:`fedrepro.runs.store`).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import operator
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from .env.settings import env_flag
from .errors import ConfigError
from .params import INT64, check_fields, declared_types, hp, is_float_for_int, normalise, normalise_values
from .registry import did_you_mean
from .version import VERSION as __version__

PROFILES = ("smoke", "laptop", "paper")


class _YamlLoader(yaml.SafeLoader):
    """YAML as users write numbers: PyYAML follows YAML 1.1, where ``1e-3`` (no dot) is a string;
    YAML 1.2 and every user reading it take it for a float. A key given twice in one mapping is an
    error (YAML 1.2 forbids it; PyYAML would keep the last one, and a repeated section would
    silently drop the first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            check_unique_keys(self, node)
        return super().construct_mapping(node, deep=deep)


def check_unique_keys(loader: yaml.SafeLoader, node: yaml.MappingNode) -> None:
    """Raise a YAML error at the second occurrence of a key in the mapping ``node``."""
    first: dict[Any, Any] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue  # "<<" merges are meant to be overridden; a non-scalar key cannot repeat a section
        key = loader.construct_object(key_node)
        if key in first:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {first[key].start_mark.line + 1}); "
                "give each key once", key_node.start_mark)
        first[key] = key_node


_YamlLoader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def yaml_load(text: str, source: str) -> Any:
    """Parse YAML text; a ConfigError naming ``source`` (and the line) when it is not valid YAML."""
    try:
        return yaml.load(text, Loader=_YamlLoader)  # noqa: S506  (a SafeLoader subclass)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{source} is not valid YAML{where}: {problem}") from None


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)
DEFAULT_PROFILE = "laptop"

# The rehearsal of the paper profile (``fedrepro reproduce --profile paper --rehearse``): every
# paper-profile config built while $FEDREPRO_REHEARSE is set is cut by :func:`rehearse_dict` to what
# proves the code at the papers' shapes (models, client counts, image sizes), not to what trains:
# REHEARSAL_ROUNDS rounds (two, not one: a by-round cut needs a round to read, and FedPFT's
# 15_time times the rounds after the first, its warm-up; with one round it stops, "skip_first=1
# leaves no rounds to time"), one local epoch of one mini-batch per client, at most
# REHEARSAL_CLIENTS clients a round (the paper's own count where it is smaller; not two: pFedCSPC's
# 08_gradcam reads client 0's weights from the last round's server state, which holds only the
# clients sampled in it), each client's training split cut to at most
# REHEARSAL_TRAIN_BATCHES mini-batches of the run's batch size (two: a search's validation share
# (0.2) still leaves a whole batch to train on; a method that encodes a client's whole split with a
# frozen encoder, as FedOTP's CLIP does, encodes that many images and not the paper's 500), and
# REHEARSAL_TEST_IMAGES test images per client. Its numbers mean nothing.
ENV_REHEARSE = "FEDREPRO_REHEARSE"
REHEARSAL_ROUNDS = 2
REHEARSAL_CLIENTS = 10
REHEARSAL_TRAIN_BATCHES = 2
REHEARSAL_TEST_IMAGES = 4
# The paper's schedule a rehearsal records (RunConfig.rehearsal), from train.
REHEARSED_FIELDS = ("rounds", "local_epochs", "participation")
# The split sizes a rehearsal cuts and records beside the schedule: a split that gives each client a
# fixed count (``train_per_client``: FedPFT's fixed_dirichlet, the domain split) is cut to the cap; one
# that shares the whole training split among the clients (dirichlet, pathological, domain_dirichlet)
# is cut by drawing at most clients x cap images before it splits (``max_train``). Few-shot splits
# (``shots``: at most 16 x 10 images a client, FedOTP's Caltech101) and the per-user split, whose
# clients are the dataset's own users (by_user: iNaturalist), keep their sizes.
REHEARSED_SPLITS = ("train_per_client", "max_train")
REHEARSAL_UNCUT_PARTITIONS = ("by_user",)


def rehearsing() -> bool:
    """Whether paper-profile configs are built as rehearsals ($FEDREPRO_REHEARSE a yes value)."""
    return env_flag(ENV_REHEARSE)


@dataclass
class DataConfig:
    """Which dataset, how it is split across clients (see :mod:`fedrepro.data.partition`)."""

    dataset: str = "fashion_mnist"  # checked against the dataset registry
    dataset_args: dict = hp(factory=dict, check=_is_dict, valid="a mapping")
    partition: str = "fixed_dirichlet"  # checked against the partitioner registry
    partition_args: dict = hp(factory=lambda: {"alpha": 0.5, "train_per_client": 250, "test_per_client": 100},
                              check=_is_dict, valid="a mapping")
    num_clients: int = hp(20, ge=1)
    holdout_clients: int = hp(0, ge=0)  # and < num_clients
    # Subsample the dataset before partitioning; the smoke profile uses this to stay in seconds.
    max_train: int | None = hp(None, ge=1)
    max_test: int | None = hp(None, ge=1)
    # None: the partition is drawn from the run seed, so every seed sees a different split (the
    # papers' "3 seeds" re-draw everything). Set it to hold the split fixed across seeds.
    partition_seed: int | None = hp(None, ge=0)
    # Hold out this fraction of each client's training split as its *test* split (a validation
    # split, for choosing hyperparameters without looking at test data: fedrepro.execute.tuning); 0
    # scores on the test split.
    validation: float = hp(0.0, ge=0, lt=1)
    # Score each client on at most its first this many test images (None: all of them). The
    # rehearsal (:func:`rehearse_dict`) sets it, so evaluating 100 clients on a full-size model stays cheap.
    max_test_per_client: int | None = hp(None, ge=1)


@dataclass
class ModelConfig:
    """A model from :func:`fedrepro.models.create_model` and its keyword arguments."""

    name: str = "resnet8"  # checked against the model registry
    args: dict = hp(factory=lambda: {"width": 16}, check=_is_dict, valid="a mapping")


@dataclass
class TrainConfig:
    """The federated schedule and the local optimiser (SGD, re-created every round)."""

    rounds: int = hp(20, ge=1)
    local_epochs: int = hp(1, ge=1)
    batch_size: int = hp(50, ge=1)
    lr: float = hp(0.05, gt=0)
    momentum: float = hp(0.9, ge=0, lt=1)
    weight_decay: float = hp(0.0, ge=0)
    participation: float = hp(1.0, gt=0, le=1)
    eval_every: int = hp(1, ge=1)
    checkpoint_every: int = hp(1, ge=1)
    # Also evaluate the method's *global* model (if it has one) on the dataset's whole test split
    # every evaluated round (``global_acc``; pFedCSPC's ACC_global, TNNLS §V-A2 Eq. 19).
    global_eval: bool = hp(False)
    # Before each client's evaluation, fine-tune a copy of its model for this many epochs with CE
    # (``ModelMethod`` baselines): pFedCSPC's "Local" score of a global method (TNNLS Table II's
    # FedAvg "Local" column equals Table III's FedAvg-FT, FedAvg with local fine-tuning).
    eval_finetune_epochs: int = hp(0, ge=0)
    # The learning rate of prompt tokens in methods that prompt-tune a frozen backbone (None:
    # ``lr``, one rate for prompts and head as PEP-FedPT App. A.3.2 trains them). VPT (Jia et al.
    # 2022) tunes prompts at rates far above the head's; a small backbone whose attention gives one
    # inserted token little weight needs that too. Methods without prompts ignore it.
    prompt_lr: float | None = hp(None, gt=0)
    # Training augmentation of each batch (:data:`fedrepro.data.train_augment.TRAIN_AUGMENTS`): the
    # random crop + flip the pFedCSPC code trains with. "none" draws nothing.
    augment: str = hp("none", choices=("none", "crop_flip", "crop_flip_reflect", "flip"))
    # Rounds by convergence: stop at the first evaluated round at which the mean client accuracy
    # meets the flatness rule (fedrepro.fl.flatness: the mean over the last ``flat_window``
    # evaluated rounds within max(0.5 points, 2x its round-to-round noise) of the ``flat_window``
    # before), and at ``rounds`` (the maximum) otherwise. A run that stops early reports its last
    # evaluated round (the stop) as its final round and ``rounds`` in its summary; it stores every
    # round it trained, so by-round cuts (fedrepro.analysis.by_round) read it up to the stop.
    stop_when_flat: bool = hp(False)
    flat_window: int = hp(5, ge=2)  # evaluated rounds per window; hashed only with stop_when_flat
    # The first round at which the rule may stop a run (hashed only with stop_when_flat): a budget
    # that a pilot found is trained in full, and only the runs still moving there train on. A run of
    # the same config with this many fixed rounds is then a prefix of every such run. At most
    # ``rounds`` when the rule is on (validate()).
    flat_from: int = hp(0, ge=0)
    # At most this many mini-batches of a client's training split per pass over it (a local epoch,
    # or a feature-extraction pass), None: all of them. The rehearsal sets 1: one local step.
    max_local_batches: int | None = hp(None, ge=1)


@dataclass
class MethodConfig:
    """A method from :data:`fedrepro.methods.METHODS`; ``args`` fill its ``Params`` dataclass."""

    name: str = "fedavg"  # checked against the method registry; args by the method's Params
    args: dict = hp(factory=dict, check=_is_dict, valid="a mapping")


# Fields that change where or how fast a run happens, never its result: left out of the hash.
_UNHASHED = ("device", "runs_dir", "progress")
# Fields added after results were first stored: hashed only when set away from this value, so
# older run folders keep their keys.
_HASHED_IF_NOT = {("train", "global_eval"): False, ("train", "eval_finetune_epochs"): 0, ("train", "prompt_lr"): None,
                 ("train", "augment"): "none", ("data", "validation"): 0.0, ("train", "stop_when_flat"): False,
                 ("train", "max_local_batches"): None, ("data", "max_test_per_client"): None,
                 ("train", "flat_from"): 0}
# Fields that only mean something when another is on: hashed only then.
_HASHED_WITH = {("train", "flat_window"): ("train", "stop_when_flat"),
                ("train", "flat_from"): ("train", "stop_when_flat")}


@dataclass
class RunConfig:
    profile: str = hp(DEFAULT_PROFILE, choices=PROFILES)
    seed: int = hp(0, ge=0)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    device: str = hp("auto", check=lambda v: isinstance(v, str) and (
        v == "auto" or v.split(":")[0] in ("cpu", "cuda", "mps")), valid="'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")
    runs_dir: str | None = hp(None, check=lambda v: v is None or isinstance(v, str),
                              valid="null or a folder path (a string)")
    progress: bool = hp(True)
    # Intra-op CPU threads while this run trains. CPU kernels sum in a thread-count-dependent
    # order, so the count is part of what fixes the result (hashed): the same config gives the
    # same numbers from a notebook cell, the CLI or a pool worker. 1 also trains fastest per core
    # at the laptop's sizes: two 1-thread runs side by side train about 1.6x the images of one
    # 2-thread run (docs/speed.md).
    threads: int = hp(1, ge=1, le=256)
    # How 4-d weights (convolutions) are laid out in memory. Like the thread count it changes the
    # order of float sums, so it is part of the result (hashed). channels_last trains the laptop's
    # conv models 1.1-1.4x faster on a CPU core (docs/speed.md).
    memory_format: str = hp("channels_last", choices=("channels_last", "contiguous"))
    # A rehearsal of a paper-profile run (:func:`rehearse_dict`): the paper's schedule it stands for
    # (rounds, local epochs, participation) and the cut; empty for a real run. Hashed when set, so a rehearsal
    # is stored under a hash of its own and never read as the paper's run.
    rehearsal: dict = hp(factory=dict, check=lambda v: isinstance(v, dict) and set(v) <= {"paper", "cut"},
                         valid="{} or the rehearsal's {'paper': ..., 'cut': ...} (set by rehearse_dict)")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def hashed_dict(self, fields: dict | None = None) -> dict:
        """What :meth:`hash` digests (``fields``: this config's :meth:`to_dict`, when the caller has it)."""
        d = normalised_dict(self.to_dict() if fields is None else fields)  # a copy: ``fields`` stays as given
        for k in _UNHASHED:
            d.pop(k)
        if not d["rehearsal"]:
            d.pop("rehearsal")
        for (section, key), default in _HASHED_IF_NOT.items():
            if d[section].get(key) == default:
                d[section].pop(key)
        for (section, key), (on_section, on_key) in _HASHED_WITH.items():
            if not d[on_section].get(on_key):
                d[section].pop(key, None)
        d["method"]["args"] = _non_default_method_args(self.method.name, self.method.args)

        d["fedrepro_version"] = __version__
        return d

    def hash(self) -> str:
        """Hash of everything that determines the result (not the device or output folder)."""
        # Normalising looks up each named model, method and dataset's argument types, which imports
        # their registries and torch with them. The result is kept with the config (and pickled with
        # it), keyed by the fields as they are, so the scheduling process of fedrepro reproduce reads
        # the hash of a config the planner sent without loading torch, and a changed field recomputes.
        fields = self.to_dict()
        raw = json.dumps(fields, sort_keys=True, default=str)
        memo = self.__dict__.get("_hash_memo")
        if memo is not None and memo[0] == raw:
            return memo[1]
        blob = json.dumps(self.hashed_dict(fields), sort_keys=True, separators=(",", ":"), default=str)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
        self.__dict__["_hash_memo"] = (raw, digest)
        return digest

    def replace(self, **overrides: Any) -> "RunConfig":
        """A validated copy with overrides (nested dicts or dotted keys) applied."""
        d = self.to_dict()
        _apply(d, overrides)
        return from_dict(d)

    def full_budget(self) -> "RunConfig":
        """This config training all of its ``train.rounds`` (the early stop off), for a run whose final
        model an analysis reads: the stop watches the accuracy curve, not what a probe of the model
        measures. Its hash is the fixed-budget run's (``flat_*`` are hashed only with the stop)."""
        return self.replace(**{"train.stop_when_flat": False}) if self.train.stop_when_flat else self

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _non_default_method_args(name: str, args: Mapping[str, Any]) -> dict:
    """``args`` without entries equal (same value and type) to the method's own defaults, so that
    ``method.args={"r_f": 4}`` and ``{}`` name the same resolved config and share one run folder."""
    from .methods import METHODS  # defers torch: importing the package registers every method

    try:
        params = METHODS.get(name).Params
    except Exception:  # noqa: BLE001  (validation reports unknown methods; hashing must not)
        return dict(args)
    types = declared_types(params)
    # A default compares in its declared type too (a float field declared with default 80 is 80.0).
    defaults = {f.name: normalise(f.default, types.get(f.name)) for f in dataclasses.fields(params)
                if f.default is not dataclasses.MISSING}
    return {k: v for k, v in args.items()
            if not (k in defaults and type(v) is type(defaults[k]) and v == defaults[k])}


# --------------------------------------------------------------------------------------------
# Profiles. The dataclass defaults above are the laptop profile, sized for a 2-core CPU:
# ResNet-8 at width 16 (m = 64) trains at about 5,000 img/s on 28×28 images, so one
# run of 20 clients × 250 images × 20 rounds takes about 25 s (docs/config.md, "Profiles").

def check_profile(profile: Any) -> str:
    """``profile`` when it is one of :data:`PROFILES`, else a one-line error listing them."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    return profile


def _profile_defaults(profile: str) -> dict:
    check_profile(profile)
    if profile == "smoke":
        return {
            "data": {"max_train": 3000, "max_test": 600, "num_clients": 4,
                     "partition_args": {"alpha": 0.5, "train_per_client": 200, "test_per_client": 50}},
            "model": {"name": "resnet8", "args": {"width": 8}},
            "train": {"rounds": 2, "local_epochs": 1, "batch_size": 50, "lr": 0.05},
        }
    if profile == "laptop":
        return {}  # the dataclass defaults are the laptop profile
    # "paper". FedPFT (ICLR) §4.1 and App. D.3: 40 clients x 500/100, ResNet-8, B=100, R=5, T=1000, lr 0.1.
    return {
        "data": {"dataset": "cifar10", "num_clients": 40,
                 "partition_args": {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100}},
        "model": {"name": "resnet8", "args": {"width": 64}},
        "train": {"rounds": 1000, "local_epochs": 5, "batch_size": 100, "lr": 0.1},
    }


def default_seeds(profile: str) -> list[int]:
    """Seeds a notebook runs by default: one for ``smoke`` and for the paper profile's rehearsal
    (:func:`rehearsing`), three (the papers' count) otherwise."""
    return [0] if profile == "smoke" or (profile == "paper" and rehearsing()) else [0, 1, 2]


ENV_PROFILE = "FEDREPRO_PROFILE"


def profile_from_env(default: str = DEFAULT_PROFILE) -> str:
    """The profile named by ``FEDREPRO_PROFILE``, else ``default`` (which the variable overrides;
    notebooks use :func:`resolve_profile`, where an explicit profile wins)."""
    profile = os.environ.get(ENV_PROFILE) or default
    if profile not in PROFILES:
        raise ConfigError(f"{ENV_PROFILE}={profile!r}; valid profiles: {', '.join(PROFILES)}")
    return profile


# Called with the profile each time a notebook's setup cell resolves it (:func:`resolve_profile`).
# The package registers fedrepro.app.notebook_header.announce here, whose text (the runs the notebook
# needs, those stored, the predicted time) is then the notebook's first output; this module, a layer
# below the plan and the store, cannot call it itself. Nothing here enters a config or its hash.
ON_RESOLVE: list = []


def resolve_profile(profile: str | None = None, default: str = DEFAULT_PROFILE) -> str:
    """The profile a notebook runs at: ``profile`` when given (papermill's ``-p PROFILE``, or the
    parameters cell edited by hand), else ``$FEDREPRO_PROFILE`` (nbval cannot inject parameters),
    else ``default``. An explicit profile that differs from ``$FEDREPRO_PROFILE`` wins, with a
    warning that names both, so that neither silently overrides the other. Each function of
    :data:`ON_RESOLVE` is then called with the profile."""
    chosen = _resolved_profile(profile, default)
    for hook in ON_RESOLVE:
        hook(chosen)
    return chosen


def _resolved_profile(profile: str | None, default: str) -> str:
    if profile is None:
        return profile_from_env(default)
    if profile not in PROFILES:
        raise ConfigError(f"PROFILE={profile!r}; valid profiles: {', '.join(PROFILES)} (or None: "
                          f"${ENV_PROFILE}, else {default})")
    env = os.environ.get(ENV_PROFILE)
    if env and env != profile:
        import warnings

        warnings.warn(f"PROFILE={profile!r} was given explicitly and wins over {ENV_PROFILE}={env!r}",
                      stacklevel=3)
    return profile


def make_config(profile: str | None = None, overrides: Mapping[str, Any] | None = None,
                yaml_path: str | os.PathLike | None = None, **kw_overrides: Any) -> RunConfig:
    """Resolve ``profile`` defaults, then a YAML file, then ``overrides``, then keyword overrides.

    Keyword overrides use ``__`` for nesting (``train__rounds=5``) so they read well in notebooks.
    """
    profile = profile or DEFAULT_PROFILE
    d = RunConfig().to_dict()
    _merge(d, _profile_defaults(profile), path="")
    d["profile"] = profile
    if profile == "paper" and rehearsing():
        d["rehearsal"] = {"paper": {key: d["train"][key] for key in REHEARSED_FIELDS}, "cut": {}}
    if yaml_path is not None:
        loaded = _read_yaml_file(Path(yaml_path))
        loaded = {} if loaded is None else loaded  # an empty file (or a lone null): the defaults
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {str(yaml_path)!r} must hold a mapping, got {type(loaded).__name__}")
        try:
            _apply(d, loaded)
        except ConfigError as e:
            raise ConfigError(f"config file {str(yaml_path)!r}: {e}") from None
    if overrides:
        _apply(d, overrides)
    if kw_overrides:
        _apply(d, {k.replace("__", "."): v for k, v in kw_overrides.items()})
    return from_dict(d)


def _read_yaml_file(p: Path) -> Any:
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist" + (" (it is a folder)" if p.is_dir() else ""))
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as e:
        raise ConfigError(f"config file {str(p)!r} cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text (byte {e.start}: {e.reason}); "
                          "valid: a YAML mapping of config keys") from None
    return yaml_load(text, f"config file {str(p)!r}")


def parse_cli_sets(pairs: list[str]) -> dict:
    """``["train.rounds=5", "method.name=fedper"]`` -> dotted dict with YAML-typed values."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"--set {pair!r} has no key; expected key=value, e.g. train.rounds=5")
        out[key] = yaml_load(value, f"--set {key}={value!r}") if value.strip() else None
    return out


# --------------------------------------------------------------------------------------------
# Construction and validation

CONFIG_SECTIONS = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "method": MethodConfig}
FREE_DICTS = {("data", "dataset_args"), ("data", "partition_args"), ("model", "args"), ("method", "args")}
# Arguments belong to the name they configure: choosing another name drops the old arguments.
_NAME_ARGS = (("data", "dataset", "dataset_args"), ("data", "partition", "partition_args"),
              ("model", "name", "args"), ("method", "name", "args"))


def _apply(base: dict, layer: Mapping[str, Any]) -> None:
    """Merge one override layer, first resetting the arguments of any name it changes."""
    layer = _expand_dotted(layer)
    record, train = base.get("rehearsal"), layer.get("train")
    if record and isinstance(train, Mapping) and "rehearsal" not in layer:
        # A layer that sets the schedule of a rehearsed config sets the paper's value, even where it
        # equals the cut's (FedOTP's E = 1 on CIFAR-100): rehearse_dict could not tell them apart.
        record.setdefault("paper", {}).update({k: train[k] for k in REHEARSED_FIELDS if k in train})
    data = layer.get("data")
    if record and isinstance(data, Mapping) and "rehearsal" not in layer:
        # The same for the split sizes the cut records (a layer's own 500 images a client, even where
        # that equals the cut's cap). A size the split does not cut leaves the record in rehearse_dict.
        args = data.get("partition_args")
        sizes = {**({"max_train": data["max_train"]} if "max_train" in data else {}),
                 **({"train_per_client": args["train_per_client"]}
                    if isinstance(args, Mapping) and "train_per_client" in args else {})}
        record.setdefault("paper", {}).update(sizes)
    for section, name_key, args_key in _NAME_ARGS:
        sec = layer.get(section)
        if isinstance(sec, Mapping) and name_key in sec and sec[name_key] != base[section][name_key]:
            base[section][args_key] = {}
    _merge(base, layer, path="")


def _expand_dotted(d: Mapping[str, Any]) -> dict:
    out: dict[str, Any] = {}
    for key, value in d.items():
        parts = str(key).split(".")
        cur = out
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
            if not isinstance(cur, dict):
                raise ConfigError(f"config key {key!r} conflicts with a non-mapping value")
        if isinstance(value, Mapping) and isinstance(cur.get(parts[-1]), dict):
            cur[parts[-1]].update(_expand_dotted(value))
        else:
            cur[parts[-1]] = _expand_dotted(value) if isinstance(value, Mapping) else value
    return out


def _merge(base: dict, upd: Mapping[str, Any], path: str) -> None:
    """Merge ``upd`` into ``base`` in place; keys must exist in ``base`` unless it is a free dict."""
    for key, value in upd.items():
        full = f"{path}{key}"
        top = tuple(full.split("."))
        if key not in base and top[:2] not in FREE_DICTS and len(top) <= 2:
            valid = ", ".join(f"{path}{k}" for k in base)
            raise ConfigError(f"unknown config key {full!r}; valid keys here: {valid}")
        if isinstance(base.get(key), dict) and not isinstance(value, Mapping):
            # Replacing a section by a scalar would drop it, and a later --set would rebuild it from
            # nothing: a section is a mapping, whatever else is set.
            raise ConfigError(f"invalid {full}={value!r}: {full} is a section, so it must be a mapping "
                              f"(key: value pairs, e.g. {_example_key(full, base[key])}=...)")
        if top in FREE_DICTS and isinstance(value, Mapping):
            # Free-form argument dicts: a profile or user override replaces keys, keeps the others.
            base.setdefault(key, {}).update(copy.deepcopy(dict(value)))
        elif isinstance(base.get(key), dict) and isinstance(value, Mapping) and top not in FREE_DICTS:
            _merge(base[key], value, path=f"{full}.")
        else:
            base[key] = copy.deepcopy(value)


def _example_key(section: str, current: dict) -> str:
    return f"{section}.{next(iter(current))}" if current else f"{section}.<name>"


def from_dict(d: Mapping[str, Any]) -> RunConfig:
    """Build and validate a :class:`RunConfig` from a full or partial nested dict."""
    d = dict(d)
    kwargs: dict[str, Any] = {}
    valid_top = {f.name for f in fields(RunConfig)}
    for key in d:
        if key not in valid_top:
            raise ConfigError(f"unknown config key {key!r}; valid keys: {', '.join(sorted(valid_top))}")
    if isinstance(d.get("runs_dir"), os.PathLike):  # a Path is a fine way to name the folder
        d["runs_dir"] = os.fspath(d["runs_dir"])
    d = rehearse_dict(d)
    for f in fields(RunConfig):
        if f.name not in d:
            continue
        value = d[f.name]
        if f.name in CONFIG_SECTIONS:
            cls = CONFIG_SECTIONS[f.name]
            if isinstance(value, cls):
                value = dataclasses.asdict(value)
            if not isinstance(value, Mapping):
                raise ConfigError(f"config section {f.name!r} must be a mapping, got {value!r}")
            names = {g.name for g in fields(cls)}
            for k in value:
                if k not in names:
                    raise ConfigError(f"unknown config key '{f.name}.{k}'; valid keys: "
                                      + ", ".join(f"{f.name}.{n}" for n in sorted(names)))
            value = cls(**copy.deepcopy(dict(value)))
        kwargs[f.name] = value
    cfg = _normalised(RunConfig(**kwargs))
    validate(cfg)
    return cfg


def rehearse_dict(d: Mapping[str, Any]) -> dict:
    """A config dict (:meth:`RunConfig.to_dict`'s form, possibly partial) cut to the rehearsal's budget
    when its ``rehearsal`` field is set; unchanged otherwise.

    ``rehearsal["paper"]`` keeps the paper's schedule and split sizes the rehearsal stands for (what
    the cost table multiplies out) and ``rehearsal["cut"]`` the values the cut set. A value that differs from the
    cut was set after it (a variant's own rounds, a table row's participation): it is the paper's
    new value, recorded and cut in its turn. So cutting twice is cutting once, in any layer order."""
    record = d.get("rehearsal")
    if not isinstance(record, Mapping) or not record:
        return dict(d)
    d = copy.deepcopy(dict(d))
    paper, cut = copy.deepcopy(dict(record.get("paper", {}))), copy.deepcopy(dict(record.get("cut", {})))
    base = RunConfig().to_dict()
    for section, cls in (("data", DataConfig), ("train", TrainConfig)):
        value = d.setdefault(section, {})
        if isinstance(value, cls):
            d[section] = dataclasses.asdict(value)
    data, train = d["data"], d["train"]
    clients = data.get("num_clients", base["data"]["num_clients"]) - data.get("holdout_clients", 0)
    cuts = {"rounds": lambda v: min(v, REHEARSAL_ROUNDS), "local_epochs": lambda v: 1,
            "participation": lambda v: min(v, REHEARSAL_CLIENTS / max(clients, 1))}
    for key in REHEARSED_FIELDS:
        train[key] = _cut(key, train.get(key, base["train"][key]), paper, cut, cuts[key])
    _cut_splits(data, train.get("batch_size", base["train"]["batch_size"]), paper, cut, base["data"])
    d["rehearsal"] = {"paper": paper, "cut": cut}
    train["max_local_batches"] = 1
    data["max_test_per_client"] = min(data.get("max_test_per_client") or REHEARSAL_TEST_IMAGES, REHEARSAL_TEST_IMAGES)
    return d


def _cut(key: str, value: Any, paper: dict, cut: dict, rule: Callable[[Any], Any]) -> Any:
    """``value`` cut by ``rule``, recording the paper's value and the cut's (:func:`rehearse_dict`): a
    value that differs from the last cut was set after it, so it is the paper's new value."""
    if key not in paper or value != cut.get(key):
        paper[key] = value
    cut[key] = rule(paper[key])
    return cut[key]


def _cut_splits(data: dict, batch_size: int, paper: dict, cut: dict, base: dict) -> None:
    """Cut ``data`` (a config dict's data section) so that each client holds at most
    REHEARSAL_TRAIN_BATCHES mini-batches of ``batch_size`` training images (:data:`REHEARSED_SPLITS`),
    recording the paper's sizes; a size that no longer applies (a later layer chose another split)
    gets the paper's value back and leaves the record."""
    cap = REHEARSAL_TRAIN_BATCHES * batch_size
    args = dict(data.get("partition_args", base["partition_args"]))
    whole = (data.get("partition", base["partition"]) not in REHEARSAL_UNCUT_PARTITIONS
             and "train_per_client" not in args and not args.get("shots"))
    current = {"train_per_client": args.get("train_per_client"), "max_train": data.get("max_train", base["max_train"])}
    applies = {"train_per_client": "train_per_client" in args, "max_train": whole}
    rules = {"train_per_client": lambda v: min(v, cap),
             "max_train": lambda v: min(v or math.inf, cap * data.get("num_clients", base["num_clients"]))}
    for key in REHEARSED_SPLITS:
        if applies[key]:
            value = _cut(key, current[key], paper, cut, rules[key])
            if key == "train_per_client":
                data["partition_args"] = {**args, key: value}
            else:
                data[key] = value
            continue
        before, last = paper.pop(key, None), cut.pop(key, None)
        if key == "max_train" and last is not None and current[key] == last:
            data[key] = before  # cut before a later layer chose a split it does not cut: the paper's again


def _arg_types(owner: str, name: Any) -> dict[str, Any]:
    """The declared types of the arguments of the registered ``name``: a method's ``Params``, or a
    model, partitioner or dataset builder's parameters (``owner`` says which); {} for a name that
    is not registered (validation reports it)."""
    try:
        if owner == "method":
            from .methods import METHODS

            return declared_types(METHODS.get(name).Params)
        if owner == "model":
            from .models import MODELS as registry
        elif owner == "partition":
            from .data.partition import PARTITIONERS as registry
        else:
            from .data.registry import DATASETS as registry
        return declared_types(registry.get(name))
    except Exception:  # noqa: BLE001  (an unknown or unhashable name: validate() names it)
        return {}


def normalised_dict(d: dict) -> dict:
    """A copy of a config dict (:meth:`RunConfig.to_dict`'s form) with every value in its declared
    type (``weight_decay=0`` becomes ``0.0``), in the sections, at the top and in the arguments of
    each named model, method, partition and dataset. So a config means one thing: equal values hash
    equally and key one run folder."""
    d = copy.deepcopy(d)
    top = declared_types(RunConfig)
    for key, value in d.items():
        if key in CONFIG_SECTIONS:
            d[key] = normalise_values(value, declared_types(CONFIG_SECTIONS[key]))
        else:
            d[key] = normalise(value, top.get(key))
    for section, name_key, args_key in _NAME_ARGS:
        sec = d.get(section)
        if isinstance(sec, dict) and isinstance(sec.get(args_key), dict):
            sec[args_key] = normalise_values(sec[args_key], _arg_types(section if section != "data" else name_key,
                                                                       sec.get(name_key)))
    return d


def _normalised(cfg: RunConfig) -> RunConfig:
    d = normalised_dict(cfg.to_dict())
    sections = {name: cls(**d.pop(name)) for name, cls in CONFIG_SECTIONS.items()}
    return RunConfig(**d, **sections)


def _check(cond: bool, key: str, value: Any, valid: str, hint: str = "") -> None:
    if not cond:
        raise ConfigError(f"invalid {key}={value!r}{hint}; valid: {valid}")


def check_seeds(seeds: Any, name: str = "seeds") -> list[int]:
    """``seeds`` as a list of ints: distinct integers >= 0, in any iterable but a string. A seed
    given twice would count one run twice in a claim's paired test, so it is an error, not merged."""
    if isinstance(seeds, (str, bytes, Mapping)) or not isinstance(seeds, Iterable):
        raise ConfigError(f"invalid {name}={seeds!r}; valid: a list of distinct integers in [0, 2**63), e.g. [0, 1, 2]")
    out = []
    for s in seeds:
        try:
            seed = operator.index(s)  # ints and numpy integers; not 1.0, not "1", not True
        except TypeError:
            seed = None
        if seed is None or isinstance(s, bool) or not 0 <= seed < INT64:
            raise ConfigError(f"invalid {name}: {s!r}; valid: a list of distinct integers in [0, 2**63), "
                              "e.g. [0, 1, 2]")
        out.append(seed)
    twice = sorted({s for s in out if out.count(s) > 1})
    if twice:
        raise ConfigError(f"invalid {name}={out}: seed {', '.join(map(str, twice))} given twice; valid: distinct "
                          "integers in [0, 2**63)")
    return out


def validate(cfg: RunConfig) -> None:
    """Check every value: each field against the bounds declared with its default, then what
    relates two fields, then the names against the live registries."""
    from .data import list_datasets
    from .data.partition import list_partitions
    from .methods import METHODS
    from .models import list_models

    check_fields(cfg)
    for name in CONFIG_SECTIONS:
        check_fields(getattr(cfg, name), f"{name}.")
    d = cfg.data
    _check(d.holdout_clients < d.num_clients, "data.holdout_clients", d.holdout_clients,
           f"an integer in [0, {d.num_clients - 1}]")
    t = cfg.train
    if t.stop_when_flat:  # a first round past the last would leave the early stop switched on but never reached
        _check(t.flat_from <= t.rounds, "train.flat_from", t.flat_from,
               f"an integer in [0, train.rounds={t.rounds}] (the first round the early stop may end the run)")
    alpha = d.partition_args.get("alpha")
    if alpha is not None:
        _check(isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and math.isfinite(alpha) and alpha > 0,
               "data.partition_args.alpha", alpha, "a number > 0")
    # Names are looked up in registries (dicts): anything but a string is invalid, not unhashable.
    for key, value, names in (("data.dataset", d.dataset, list_datasets()), ("data.partition", d.partition,
                              list_partitions()), ("model.name", cfg.model.name, list_models()),
                              ("method.name", cfg.method.name, METHODS.names())):
        known = isinstance(value, str) and value in names
        # The suggestion only for a bad name: looking for close matches costs more than the check.
        _check(known, key, value, ", ".join(names), "" if known else did_you_mean(value, names))
    METHODS.get(cfg.method.name).parse_params(cfg.method.args)
    _check_integer_args(cfg)


def _check_integer_args(cfg: RunConfig) -> None:
    """A float where a model, partition or dataset builder declares an integer is an error, as it is
    for the config's own fields (the method's arguments are checked by its ``Params``)."""
    for section, name_key, args_key in _NAME_ARGS:
        if section == "method":
            continue
        sec = getattr(cfg, section)
        types = _arg_types(section if section != "data" else name_key, getattr(sec, name_key))
        for key, value in getattr(sec, args_key).items():
            _check(not is_float_for_int(value, types.get(key)), f"{section}.{args_key}.{key}", value, "an integer")
