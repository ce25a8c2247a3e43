"""pFedPT (Li et al., TMLR 2024): a personal visual prompt added to the image border, a global model.

"Visual Prompt Based Personalized Federated Learning". A FedPFT (ICLR) Table 2 baseline.

Each client owns a **padding prompt** (Bahng et al. 2022's ``PadPrompter``): learnable pixels in a
frame of width ``prompt_size`` around the image, zero inside, **added** to the (normalised) input.
The backbone (the whole configured model, φ and head) is global and FedAvg-aggregated; the prompt
never leaves the client. One round on a client (official ``system/flcore/clients/clientpt.py``):

1. Download the global backbone; keep the own prompt.
2. **Prompt phase**, ``prompt_epochs`` epochs: backbone frozen, the prompt trained with its own SGD
   (``prompt_lr``, ``prompt_momentum``, no weight decay).
3. **Backbone phase**, ``model_epochs`` epochs (None: ``train.local_epochs``): prompt frozen, the
   backbone trained with the package's SGD (``train.lr``, ``train.momentum``, ``train.weight_decay``).
4. Upload the backbone (sample-weighted FedAvg on the server).

Defaults from the official code (README / ``auto_train.sh`` for CIFAR-10): ``prompt_size = 2``
(``-np 2``, for 32×32 images; the same pixel width is used at 28×28), ``prompt_epochs = 5``
(``-pls 5``, equal to its ``-ls 5`` backbone epochs), ``prompt_lr = 1.0`` (``--pt_learning_rate 1``;
its argparse default is 20), ``prompt_momentum = 0.5`` (its ``--momentum`` default),
``prompt_init = "randn"`` (``PadPrompter`` draws N(0, 1) pixels; ``"zeros"`` starts from no prompt).

Choices the paper leaves open, each an option or stated here:

- ``prompt_bn`` — the backbone's BatchNorm mode during the prompt phase: ``"train"`` (default; the
  official code calls ``model.train()`` for both phases, so BN statistics move while the prompt
  trains) or ``"eval"`` (a frozen backbone, statistics untouched).
- Evaluation follows this package's protocol (after aggregation: the new global backbone with the
  client's own prompt), which is the model the official code's "Evaluate global model" scores at
  the start of the next round.
- The official backbone optimiser is plain SGD; here the package-wide ``train.*`` SGD is used so
  all baselines share one optimiser setting (the FedPFT paper tunes only the learning rate).

``personalized_model``: ``features`` = add the prompt, then the backbone's φ; ``head`` = the global
head (the prompt is part of the client's feature map).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..fl.local import TrainStats, evaluate_model, make_sgd, set_trainable, train_epochs
from ..fl.method import ClientUpdate, EvalResult, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

PROMPT = "prompt."
SIDES = ("pad_up", "pad_down", "pad_left", "pad_right")
INITS = ("randn", "zeros")
BN_MODES = ("train", "eval")


@dataclass
class PFedPTParams:
    prompt_size: int = hp(2, ge=1)  # border width in pixels (PadPrompt checks it against the image side)
    prompt_epochs: int = hp(5, ge=0)
    model_epochs: int | None = hp(None, ge=0)  # None: train.local_epochs
    prompt_lr: float = hp(1.0, gt=0)
    prompt_momentum: float = hp(0.5, ge=0, lt=1)
    prompt_init: str = hp("randn", choices=INITS)  # "randn" (official) | "zeros"
    prompt_bn: str = hp("train", choices=BN_MODES)  # backbone BN mode in the prompt phase: "train" (official) | "eval"


class PadPrompt(nn.Module):
    """A learnable frame of width ``size`` around a ``channels × side × side`` image, zero inside,
    added to the input (Bahng et al. 2022, as used by pFedPT)."""

    def __init__(self, channels: int, side: int, size: int, init: str = "zeros"):
        super().__init__()
        if 2 * size >= side:
            raise ConfigError(f"method.args.prompt_size={size} leaves no interior in {side}×{side} images; "
                              f"valid: an integer in [1, {(side - 1) // 2}]")
        draw = torch.randn if init == "randn" else torch.zeros
        inner = side - 2 * size
        self.pad_up = nn.Parameter(draw(1, channels, size, side))
        self.pad_down = nn.Parameter(draw(1, channels, size, side))
        self.pad_left = nn.Parameter(draw(1, channels, inner, size))
        self.pad_right = nn.Parameter(draw(1, channels, inner, size))
        self.register_buffer("_inner", torch.zeros(1, channels, inner, inner), persistent=False)

    def prompt(self) -> torch.Tensor:
        """The full ``[1, C, side, side]`` prompt image (zero in the interior)."""
        middle = torch.cat([self.pad_left, self._inner, self.pad_right], dim=3)
        return torch.cat([self.pad_up, middle, self.pad_down], dim=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.prompt()


class Prompted(nn.Module):
    """The client's model: prompt, then the backbone; ``features`` includes the prompt."""

    def __init__(self, prompt: PadPrompt, backbone: nn.Module):
        super().__init__()
        self.prompt = prompt
        self.backbone = backbone
        self.features = nn.Sequential(prompt, backbone.features)
        self.head = backbone.head
        self.feature_dim = backbone.feature_dim
        self.num_classes = backbone.num_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


@register_method("pfedpt")
class PFedPT(ModelMethod):
    """pFedPT: a personal padding prompt added to each image; the backbone is FedAvg.
    Local round: prompt epochs (backbone frozen), then backbone epochs (prompt frozen)."""

    Params = PFedPTParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.prompt = self._new_prompt("zeros")  # scratch; every client's values are loaded into it
        self.net = Prompted(self.prompt, self.model)

    def _new_prompt(self, init: str) -> PadPrompt:
        return PadPrompt(self.ctx.in_channels, self.ctx.image_size, self.p.prompt_size, init).to(self.ctx.device)

    def init_client(self, cid: int, seed: int) -> State:
        # Drawn from torch's global RNG, which the engine seeds for initialisation.
        prompt = self._new_prompt(self.p.prompt_init)
        return {PROMPT + k: v.detach().clone() for k, v in prompt.state_dict().items()}

    def load_client(self, shared: State, state: State) -> Prompted:
        self.load(shared, {})
        self.prompt.load_state_dict({k[len(PROMPT):]: v for k, v in state.items() if k.startswith(PROMPT)})
        set_trainable(self.net, True)
        return self.net

    def client_update(self, shared: State, state: State, data, gen: torch.Generator, rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        net = self.load_client(shared, state)
        stats = TrainStats(0.0)
        if self.p.prompt_epochs:
            set_trainable(self.model, False)
            opt = torch.optim.SGD(self.prompt.parameters(), lr=self.p.prompt_lr, momentum=self.p.prompt_momentum)
            stats = self._prompt_epochs(net, data, opt, gen)
            set_trainable(self.model, True)
        epochs = t.local_epochs if self.p.model_epochs is None else self.p.model_epochs
        if epochs:
            set_trainable(self.prompt, False)
            opt = make_sgd(self.model.parameters(), t.lr, t.momentum, t.weight_decay)
            stats = train_epochs(net, data, opt, epochs, t.batch_size, gen)
            set_trainable(self.prompt, True)
        upload = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        new_state = {PROMPT + k: v.detach().clone() for k, v in self.prompt.state_dict().items()}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    def _prompt_epochs(self, net: Prompted, data, opt, gen) -> TrainStats:
        """Step 2: train the prompt; the backbone's BN layers in ``prompt_bn`` mode."""
        t = self.ctx.cfg.train
        net.train()
        self.model.train(self.p.prompt_bn == "train")
        # The loop puts only the prompt in train mode, so the backbone keeps its ``prompt_bn`` mode.
        return train_epochs(self.prompt, data, opt, self.p.prompt_epochs, t.batch_size, gen,
                            batch_loss=lambda _, x, y: F.cross_entropy(net(x), y))

    def evaluate(self, shared: State, state: State, data, gen: torch.Generator) -> EvalResult:
        return evaluate_model(self.load_client(shared, state), data)

    def personalized_model(self, shared: State, state: State):
        """``features`` = prompt + φ, ``head`` = the global head."""
        return self.load_client(shared, state)
