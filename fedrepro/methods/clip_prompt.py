"""CoOp text prompts on a frozen CLIP: what FedOTP and its baselines share.

FedOTP (CVPR 2024) §3-4 and every baseline of its Table 1 (CoOp, PromptFL and its PFL adaptations,
pFedPrompt) learn CoOp context vectors (Zhou et al., IJCV 2022, §3.2) in front of each class name on
a frozen CLIP, and differ only in how many prompts a client holds, which of them are averaged by
the server, and how an image is scored against the prompts' text features. This module holds the
common part, so each method's file keeps only its own mechanism:

- :class:`ClipPromptMethod` builds the CLIP (``model.name: clip``), the prompt learner over the
  dataset's class names in label order, and the per-client image tokens (the frozen image tower is
  run once per image set and cached in memory: FedOTP §4.1 fixes the encoder, and without
  augmentation its tokens never change);
- one local round is E epochs of cross-entropy on the method's logits, SGD on the context vectors
  only (FedOTP App. B.2: SGD; momentum 0.9 and weight decay 5e-4 are Dassl's defaults in the
  official code, ``train.momentum``/``train.weight_decay``);
- the server averages the tensors named in ``SHARED`` weighted by sample count (FedOTP Eq. 4).

The official FedOTP code departs from the paper in ways that move its numbers. Each is a switch
here, off by default (the paper's behaviour is the default):

- ``class_order="set"``: class names in a Python set's order rather than label order, so prompt c
  may carry another class's name (the DomainNet/Office loaders); we draw that permutation from the
  run seed, where the official code's depends on the process's string hashing;
- ``misaligned_images``: each client's images decoupled from its labels (the label-skewed
  DomainNet/Office subsets index labels by the partition but take the domain's first images); we
  permute images within the client, which keeps the client's label distribution and breaks the
  pairing, as the official bug does;
- ``optimizer_scope="shared"``: one SGD optimiser reused across clients and rounds, so momentum
  leaks between clients. The engine's steps are pure, so the buffer travels with the broadcast:
  each round's clients start from the momentum the last client of the previous round left;
- ``seed_zero_unseeded``: the official ``if args.seed:`` skips seeding for seed 0. An unseeded run
  cannot be repeated, so at seed 0 we draw the prompt initialisation and batch order from a fixed
  stream that ignores the run seed (one arbitrary draw standing in for "unseeded").

The split fixed by a hard-coded seed is ``data.partition_seed`` (2023 in the official code).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import TrainStats, macro_f1
from ..fl.method import ClientUpdate, EvalResult, Method, State
from ..fl.seeding import derive_seed
from ..models.clip import ClipBackbone, CoOpPrompts
from ..models.clip_cache import normalized_tokens
from ..params import hp

MOMENTUM_KEY = "opt.momentum"
PAPER_N_CTX = 16


@dataclass
class ClipFeatures:
    """A client split's frozen CLIP features and labels."""

    pooled: Tensor  # [N, d]
    patches: Tensor  # [N, M, d]
    labels: Tensor  # [N]

    def __len__(self) -> int:
        return len(self.labels)

    def rows(self, idx: Tensor | slice) -> ClipFeatures:
        return ClipFeatures(self.pooled[idx], self.patches[idx], self.labels[idx])


@dataclass
class ClipPromptParams:
    """What every CLIP prompt method shares (FedOTP App. B.2; CoOp §3.2)."""

    # Context length L: 16 in FedOTP App. B.2 and CoOp. None: 16, or as many as the CLIP's text
    # context leaves room for beside the longest class name (the stand-in's 16 positions hold fewer).
    n_ctx: int | None = hp(None, ge=1)
    init_std: float = hp(0.02, gt=0)  # "random initialization": N(0, 0.02²) (CoOp)
    # The inverse temperature of the class scores. None: the CLIP's own learned scale (about 100 for
    # OpenAI's weights, CLIP §2.5; the committed stand-in learnt about 15). A number replaces it at the
    # prompt stage only, so the stand-in can score with a CLIP-like temperature (ours; a stated option).
    logit_scale: float | None = hp(None, gt=0)
    # The official FedOTP code's departures from the paper (module docstring); the paper's are the defaults.
    class_order: str = hp("label", choices=("label", "set"))
    misaligned_images: bool = hp(False)
    optimizer_scope: str = hp("client", choices=("client", "shared"))
    seed_zero_unseeded: bool = hp(False)


class ClipPromptMethod(Method):
    """A text-prompt method on a frozen CLIP: ``N_PROMPTS`` CoOp contexts per client, of which those
    named in ``SHARED`` (indices into the context tensor) are FedAvg-ed and the rest stay local.

    Subclasses implement :meth:`logits` and may override the round (:meth:`client_update`), the
    server (:meth:`aggregate`) or the evaluation.
    """

    Params = ClipPromptParams
    p: ClipPromptParams
    requires_clip = True  # tests and tools pick the model from this
    N_PROMPTS = 1
    SHARED: tuple[int, ...] = (0,)

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        model = ctx.create_model(seed=0)
        clip = getattr(model, "clip", None)
        if not isinstance(clip, ClipBackbone):
            raise ConfigError(f"method {self.name} tunes text prompts on a frozen CLIP: set model.name=clip "
                              f"(got {ctx.cfg.model.name!r})")
        if not ctx.class_names:
            raise ConfigError(f"method {self.name} builds its prompts from the class names, but the dataset "
                              f"{ctx.cfg.data.dataset!r} gave none")
        self.clip = clip.to(ctx.device)
        self.num_classes = ctx.num_classes
        self.class_names = self._ordered_names(list(ctx.class_names))
        self.prompts = CoOpPrompts(clip, self.class_names, self.context_length(clip), n_prompts=self.N_PROMPTS,
                                   generator=torch.Generator().manual_seed(0), init_std=self.p.init_std)
        self.prompts.ctx.requires_grad_(True)
        self.scale = float(clip.logit_scale()) if self.p.logit_scale is None else float(self.p.logit_scale)

    def context_length(self, clip: ClipBackbone) -> int:
        if self.p.n_ctx is not None:
            return self.p.n_ctx
        longest = max(len(clip.word_ids(f"{name}.")) for name in self.class_names)
        return max(1, min(PAPER_N_CTX, clip.context_length - 2 - longest))

    # ------------------------------------------------------------------ the official code's quirks
    def init_seed(self, seed: int) -> int:
        """The seed of the prompt initialisation: the run's, or with ``seed_zero_unseeded`` at seed 0 a
        fixed one that ignores it (the official code leaves seed 0 unseeded)."""
        if self.p.seed_zero_unseeded and self.ctx.cfg.seed == 0:
            return derive_seed(0, "init", 2023)  # fixed: ignores the run seed, as an unseeded run does
        return seed

    def _ordered_names(self, names: list[str]) -> list[str]:
        if self.p.class_order == "label":
            return names
        perm = torch.randperm(len(names), generator=torch.Generator().manual_seed(
            derive_seed(self.ctx.cfg.seed, "init", 1, 7)))
        return [names[i] for i in perm.tolist()]

    # ------------------------------------------------------------------ data
    def features(self, data: ClientData, split: str) -> ClipFeatures:
        """The client's frozen tokens for ``split`` ("train" or "test")."""
        x, y = (data.train_x, data.train_y) if split == "train" else (data.test_x, data.test_y)
        if len(y) == 0:
            d = self.clip.embed_dim
            empty = torch.zeros(0, d, device=self.ctx.device)
            return ClipFeatures(empty, empty.reshape(0, 0, d), y)
        pooled, patches = normalized_tokens(self.clip, x)
        if self.p.misaligned_images:
            gen = torch.Generator().manual_seed(derive_seed(self.ctx.cfg.seed, "init", 2, data.cid,
                                                            0 if split == "train" else 1))
            perm = torch.randperm(len(y), generator=gen)
            pooled, patches = pooled[perm], patches[perm]
        dev = self.ctx.device
        return ClipFeatures(pooled.to(dev), patches.to(dev), y.to(dev))

    # ------------------------------------------------------------------ prompts
    def _draw(self, n_prompts: int, seed: int, *keys: int) -> Tensor:
        """``n_prompts`` contexts [n, L, width] ~ N(0, init_std²) (CoOp), from the stream ``keys``."""
        gen = torch.Generator().manual_seed(derive_seed(self.init_seed(seed), "init", *keys))
        shape = (n_prompts, *self.prompts.ctx.shape[1:])
        return (torch.randn(shape, generator=gen) * self.p.init_std).to(self.ctx.device)

    def initial_ctx(self, seed: int) -> Tensor:
        """Every context vector at its start [N_PROMPTS, L, width]."""
        return self._draw(self.N_PROMPTS, seed, 1)

    def text_features(self, ctx: Tensor) -> Tensor:
        """L2-normalised text features [P, C, d] of contexts ``ctx`` [P, L, width] (differentiable)."""
        feats = torch.func.functional_call(self.prompts, {"ctx": ctx}, ())
        return F.normalize(feats, dim=-1)

    def logits(self, text: Tensor, feats: ClipFeatures) -> Tensor:
        """[B, C] class scores of ``feats`` against text features ``text`` [P, C, d]."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the round
    def init_server(self, seed: int) -> tuple[State, State]:
        start = self.initial_ctx(seed)
        return {"ctx": start[list(self.SHARED)].clone()}, {}

    def init_client(self, cid: int, seed: int) -> State:
        local = [i for i in range(self.N_PROMPTS) if i not in self.SHARED]
        if not local:
            return {}
        # Each client's local prompt gets its own draw (FedOTP Algorithm 2's P_{L,k}^0).
        return {"ctx": self._draw(len(local), seed, 3, cid)}

    def assemble(self, shared: State, state: State) -> Tensor:
        """The client's full context tensor [N_PROMPTS, L, width] from the shared and local parts."""
        parts, s, loc = [], 0, 0
        for i in range(self.N_PROMPTS):
            if i in self.SHARED:
                parts.append(shared["ctx"][s])
                s += 1
            else:
                parts.append(state["ctx"][loc])
                loc += 1
        return torch.stack(parts)

    def split(self, ctx: Tensor) -> tuple[Tensor, Tensor]:
        """(shared rows, local rows) of a full context tensor."""
        shared = [i for i in range(self.N_PROMPTS) if i in self.SHARED]
        local = [i for i in range(self.N_PROMPTS) if i not in self.SHARED]
        return ctx[shared], ctx[local]

    def optimizer(self, params: list[Tensor], shared: State) -> torch.optim.SGD:
        t = self.ctx.cfg.train
        lr = t.lr if t.prompt_lr is None else t.prompt_lr
        opt = torch.optim.SGD(params, lr=lr, momentum=t.momentum, weight_decay=t.weight_decay)
        buf = shared.get(MOMENTUM_KEY) if self.p.optimizer_scope == "shared" else None
        if buf is not None and t.momentum > 0:
            opt.state[params[0]]["momentum_buffer"] = buf.clone()
        return opt

    def batch_loss(self, ctx: Tensor, batch: ClipFeatures, anchor: State) -> Tensor:
        """The loss of one mini-batch (cross-entropy on :meth:`logits`, FedOTP Eq. 2)."""
        return F.cross_entropy(self.logits(self.text_features(ctx), batch), batch.labels)

    def train_ctx(self, ctx: Tensor, feats: ClipFeatures, gen: torch.Generator, shared: State,
                  epochs: int | None = None, anchor: State | None = None) -> tuple[Tensor, TrainStats, Tensor | None]:
        """E epochs of SGD on the context tensor; returns it, the loss stats and the momentum buffer."""
        t = self.ctx.cfg.train
        epochs = t.local_epochs if epochs is None else epochs
        param = nn.Parameter(ctx.detach().clone())
        opt = self.optimizer([param], shared)
        total, count = 0.0, 0
        n = len(feats)
        for _ in range(epochs if n else 0):
            order = torch.randperm(n, generator=gen).to(self.ctx.device)
            # train.max_local_batches caps the batches of each pass, as fl/client_data does for every
            # other method (the paper profile's rehearsal sets it to 1).
            stop = n if t.max_local_batches is None else min(n, t.max_local_batches * t.batch_size)
            for s in range(0, stop, t.batch_size):
                batch = feats.rows(order[s:s + t.batch_size])
                loss = self.batch_loss(param, batch, anchor or {})
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(batch)
                count += len(batch)
        buf = opt.state.get(param, {}).get("momentum_buffer")
        return param.detach(), TrainStats(total / max(count, 1), {}, count), buf

    def batch_generator(self, gen: torch.Generator) -> torch.Generator:
        """The generator of a round's batch order: the engine's, or with ``seed_zero_unseeded`` at seed
        0 one drawn away from it (another order than the seeded run's, as an unseeded run has)."""
        if self.p.seed_zero_unseeded and self.ctx.cfg.seed == 0:
            return torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=gen)) ^ 2023)
        return gen

    def with_momentum(self, upload: State, buf: Tensor | None) -> State:
        """``upload`` plus the optimiser's momentum buffer when one optimiser serves every client."""
        if self.p.optimizer_scope == "shared" and buf is not None:
            upload[MOMENTUM_KEY] = buf.clone()
        return upload

    @staticmethod
    def carry_momentum(out: State, shared: State, updates: list[ClientUpdate]) -> State:
        """``out`` (the next broadcast) with the shared optimiser's buffer: the last client's, else the
        one already broadcast."""
        if updates and MOMENTUM_KEY in updates[-1].upload:
            out[MOMENTUM_KEY] = updates[-1].upload[MOMENTUM_KEY]
        elif MOMENTUM_KEY in shared:
            out[MOMENTUM_KEY] = shared[MOMENTUM_KEY]
        return out

    def anchor(self, shared: State, state: State, data: ClientData) -> State:
        """What :meth:`batch_loss` may read besides the batch during a round (default: the download,
        which FedProx pulls towards)."""
        return shared

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        feats = self.features(data, "train")
        ctx, stats, buf = self.train_ctx(self.assemble(shared, state), feats, self.batch_generator(gen), shared,
                                         anchor=self.anchor(shared, state, data))
        up, local = self.split(ctx)
        upload = self.with_momentum({"ctx": up.clone()} if self.SHARED else {}, buf)  # local-only: nothing
        new_state = {**state, "ctx": local.clone()} if local.numel() else dict(state)
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates or not self.SHARED:
            return shared, server_state
        avg = weighted_average([{"ctx": u.upload["ctx"]} for u in updates], [u.num_samples for u in updates])
        return self.carry_momentum({**shared, **avg}, shared, updates), server_state

    @torch.no_grad()
    def score(self, ctx: Tensor, feats: ClipFeatures, batch_size: int = 500) -> Tensor:
        """[N, C] logits of every row of ``feats`` under contexts ``ctx``."""
        text = self.text_features(ctx)
        return torch.cat([self.logits(text, feats.rows(slice(s, s + batch_size)))
                          for s in range(0, len(feats), batch_size)]) if len(feats) else torch.zeros(0,
                                                                                                     self.num_classes)

    def eval_ctx(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> Tensor:
        """The contexts a client is scored with (its own prompts after the round's download)."""
        return self.assemble(shared, state)

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        feats = self.features(data, "test")
        return self.result(self.score(self.eval_ctx(shared, state, data, gen), feats), feats.labels)

    @staticmethod
    def result(logits: Tensor, labels: Tensor) -> EvalResult:
        if len(labels) == 0:
            return EvalResult(0, 0, 0.0)
        pred = logits.argmax(1)
        return EvalResult(correct=int((pred == labels).sum()), total=int(labels.numel()),
                          loss_sum=float(F.cross_entropy(logits, labels, reduction="sum")),
                          f1_macro=macro_f1(labels.cpu(), pred.cpu()))


def pooled_logits(scale: float, text: Tensor, feats: ClipFeatures) -> Tensor:
    """CLIP's classifier (CoOp Eq. 2): scale · cos(pooled image feature, text feature of the class)."""
    return scale * feats.pooled @ text.T


__all__ = ["MOMENTUM_KEY", "ClipFeatures", "ClipPromptMethod", "ClipPromptParams", "pooled_logits"]
