"""The method interface: pure steps that any runner (this simulator, a Flower app) can host.

A method never holds per-client state itself. The runner passes it in and stores what comes out:

- ``init_server(seed)`` -> ``(shared, server_state)``: the broadcast tensors and server-only state;
- ``init_client(cid, seed)`` -> the client's persistent state (personal layers, prompts...);
- ``client_update(shared, state, data, gen, rnd)`` -> :class:`ClientUpdate` (upload, new state);
- ``aggregate(shared, updates, server_state, rnd)`` -> ``(shared, server_state)``;
- ``evaluate(shared, state, data, gen)`` -> :class:`EvalResult` for the client's personalised model.

``shared`` and states are plain ``dict[str, Tensor | ...]`` so they checkpoint with ``torch.save``
and map onto Flower's ``ArrayRecord``/``context.state`` (its Message API) one-to-one.
"""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping

import torch

from ..errors import ConfigError
from ..params import check_fields
from .client_data import ClientData
from ..models import create_model

State = dict[str, Any]


@dataclass
class ClientUpdate:
    upload: State
    state: State
    num_samples: int
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class EvalResult:
    """A client's score on its own test split.

    ``extra`` holds any further per-client metrics a method reports (name -> value); the engine
    logs each per client, averages it over clients each evaluated round (``<name>_mean``) and keeps
    its best and final values, without knowing what it means.
    """

    correct: int
    total: int
    loss_sum: float
    # Macro-F1 over the classes present in the test split (NaN when the method did not compute it).
    f1_macro: float = float("nan")
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def acc(self) -> float:
        return self.correct / max(self.total, 1)

    @property
    def loss(self) -> float:
        return self.loss_sum / max(self.total, 1)


@dataclass
class FLContext:
    """What a method may know about the run: the resolved config, the data's shape and its class
    names in label order (``class_names[y]`` names label ``y``; text-prompted methods such as CoOp
    and FedOTP build their prompts from them)."""

    cfg: Any  # RunConfig (not imported, to keep this module free of config imports)
    num_classes: int
    in_channels: int
    image_size: int
    device: torch.device
    num_clients: int
    class_names: tuple[str, ...] = ()

    def create_model(self, seed: int):
        m = self.cfg.model
        model = create_model(m.name, num_classes=self.num_classes, in_channels=self.in_channels,
                             image_size=self.image_size, seed=seed, **m.args).to(self.device)
        if self.cfg.memory_format == "channels_last":
            # 4-d weights (convolutions) stored NHWC: 1.1-1.4x the training speed of the laptop's
            # conv models on a CPU core (docs/speed.md); other tensors are unchanged.
            model = model.to(memory_format=torch.channels_last)
        return model


@dataclass
class NoParams:
    """A method without hyperparameters of its own."""


class Method:
    """Base class. Subclasses set ``name``, ``Params`` and implement the five steps."""

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams

    def __init__(self, ctx: FLContext, params: Any):
        self.ctx = ctx
        self.p = params

    @classmethod
    def parse_params(cls, args: Mapping[str, Any] | None) -> Any:
        """Build the ``Params`` dataclass; unknown or ill-typed keys raise :class:`ConfigError`."""
        args = dict(args or {})
        names = {f.name for f in dataclasses.fields(cls.Params)}
        unknown = sorted(set(args) - names)
        if unknown:
            raise ConfigError(f"unknown method.args for {cls.name!r}: {', '.join(unknown)}; "
                              f"valid: {', '.join(sorted(names)) or '(none)'}")
        params = cls.Params(**args)
        check_fields(params, "method.args.")
        return params

    # The five steps ----------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        raise NotImplementedError

    def init_client(self, cid: int, seed: int) -> State:
        raise NotImplementedError

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        raise NotImplementedError

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        raise NotImplementedError

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        raise NotImplementedError

    def global_model(self, shared: State, server_state: State):
        """The server's global model (a module, inputs -> logits) for ``train.global_eval``, or None
        when the method has none (Local, or methods whose every model is personal)."""
        return None

    def global_variants(self, shared: State, server_state: State) -> Iterator[tuple[str, Any]]:
        """Other versions of the global model that ``train.global_eval`` also scores, as
        ``global_acc_<name>`` (pFedCSPC's before its server calibration). Yielded one at a time: a
        method may load each into the module that :meth:`global_model` returned."""
        return iter(())

    # For analyses (mismatch probe, linear probe, t-SNE) -------------------------------------
    def personalized_model(self, shared: State, state: State):
        """The client's model as a module with ``features`` (x -> the classifier's input) and ``head``.

        Analyses freeze ``features`` and retrain or wrap ``head``. For FedPFT ``features`` ends with
        the FTM: the paper probes f' = τ([φ(x), p_κ])₀, since FedPFT+Con's Probe values in
        FedPFT (ICLR) Table 1 equal the "p_κ" row of its Table 6.
        """
        raise NotImplementedError(f"{type(self).__name__} does not expose a personalised model")

    @classmethod
    def describe(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.splitlines()[0] if doc else cls.name
