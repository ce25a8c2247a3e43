"""pFedPG (Yang, Wang & Wang, ICCV 2023): "Efficient Model Personalization in Federated Learning via
Client-Specific Prompt Generation", a PEP-FedPT (arXiv) §5.1 baseline ("personalised").

The server holds a prompt generator G with a client-agnostic prompt basis and a bank of learnable
client descriptors; it never holds a client's prompt or head. Our reading of G (the form of its
attention is ours) is a key-value memory read by each client's descriptor:

    α_k = softmax(d_k K^T / sqrt(a)),    P_k = G(d_k) = Σ_j α_kj B_j,

with d_k ∈ R^a client k's descriptor, K ∈ R^{m×a} one learnable key per base prompt and
B ∈ R^{m×n×d} the m base prompts (each n tokens of the ViT width d). Different descriptors weigh
the basis differently, so each client gets its own prompt; the basis and the keys are what the
clients share.

One round (pFedPG's alternation of prompt generation and prompt adaptation):

1. the server generates P_k = G(d_k) for the sampled clients and sends client k its P_k;
2. personalised prompt adaptation: client k inserts P_k after cls at the input of the frozen ViT
   (VPT-shallow) and trains the prompt and its classification head H_k for E epochs of
   cross-entropy (the optimiser every PEP-FedPT baseline uses); it keeps the adapted prompt P̃_k
   and H_k and uploads only Δ_k = P̃_k − P_k;
3. personalised prompt generation: the server treats −Δ_k as the gradient of a client loss at G's
   output (the hypernetwork update of pFedHN, Shamsian et al. 2021) and takes one SGD step on
   (descriptors, K, B) of L = Σ_k w_k ⟨G(d_k), −Δ_k⟩, which moves each G(d_k) toward P̃_k; only the
   sampled clients' descriptors get a gradient.

Where the paper (or PEP-FedPT's use of it) is silent, the options of :class:`PFedPGParams`:

- ``head``: H_k stays on the client (default: pFedPG updates "the local classification head H_n"
  at each client, and PEP-FedPT files it under personalised methods), or FedAvg-ed (``fedavg``);
- ``eval_prompt``: a trained client is scored with the prompt it adapted last, the one its head
  was trained with (default), or with the generator's current prompt for it (``generated``);
- ``server_lr`` and ``server_weighting``: one plain SGD step of size η; ``mean`` weighs each sampled
  client by 1/``|S|`` (with one base prompt G is then one prompt updated by the mean Δ, i.e. FedVPT's
  prompt averaging at η = 1), ``sum`` gives each client's own pull its full size;
- ``n_prompts`` n = 1 (the shallow budget of every PEP-FedPT baseline), ``n_base`` m and
  ``descriptor_dim`` a: not given, ours. Initialisation (ours): d_k and K standard normal (so the
  scaled scores d_k·K_j/sqrt(a) have unit spread and clients start with clearly different
  mixtures), B VPT-uniform like every other prompt here.

A held-out client never trains, so its descriptor keeps its initial draw and its head (when
personal) the model's initial head: it is scored with G's current output for that initial descriptor
and an untrained head, which is why pFedPG collapses on held-out clients (PEP-FedPT Table 3).

In this simulator ``shared`` (what every client can read) carries the generated prompts of all
clients, one row each, and a client reads its own row; a deployment would send client k row k only.
The generator lives in the server state and is never broadcast.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import evaluate_model
from ..fl.method import ClientUpdate, EvalResult, State
from ..fl.seeding import derive_seed
from ..params import hp
from .prompted import PromptedSplit, PromptNet, PromptParams, PromptTuning, vpt_uniform
from .registry import register_method

HEAD = ("head.weight", "head.bias")
GENERATOR = ("descriptors", "keys", "base")


@dataclass
class PFedPGParams(PromptParams):
    n_prompts: int = hp(1, ge=1)  # n_S = 1 as for the other PEP-FedPT baselines (App. A.3.2)
    n_base: int = hp(8, ge=1)  # m base prompts: unstated, ours
    descriptor_dim: int | None = hp(None, ge=1)  # a; None: the ViT width d (unstated, ours)
    head: str = hp("personal", choices=("personal", "fedavg"))  # pFedPG's H_n is updated and kept locally
    eval_prompt: str = hp("adapted", choices=("adapted", "generated"))  # the prompt the head was trained with
    server_lr: float = hp(1.0, gt=0)  # η of the generator's SGD step (unstated, ours)
    server_weighting: str = hp("mean", choices=("mean", "sum"))  # mean: one base prompt = FedVPT's averaging


def generate_prompts(descriptors: Tensor, keys: Tensor, base: Tensor) -> Tensor:
    """G: [N, a] descriptors, [m, a] keys, [m, n, d] base prompts -> [N, n, d] client prompts,
    each the softmax(d_k K^T / sqrt(a))-weighted sum of the base prompts."""
    attn = torch.softmax(descriptors @ keys.T / math.sqrt(keys.shape[-1]), dim=-1)
    return torch.einsum("km,mnd->knd", attn, base)


def generator_step(generator: State, deltas: list[tuple[int, Tensor, float]], lr: float) -> State:
    """One SGD step of G's parameters on L = Σ w_k ⟨G(d_k), −Δ_k⟩ for ``deltas`` = [(k, Δ_k, w_k)]:
    −Δ_k is client k's gradient at G's output, backpropagated through G."""
    params = {k: generator[k].detach().clone().requires_grad_(True) for k in GENERATOR}
    prompts = generate_prompts(params["descriptors"], params["keys"], params["base"])
    loss = sum(-w * (prompts[k] * delta).sum() for k, delta, w in deltas)
    grads = torch.autograd.grad(loss, [params[k] for k in GENERATOR])
    return {**generator, **{k: (params[k] - lr * g).detach() for k, g in zip(GENERATOR, grads)}}


@register_method("pfedpg")
class PFedPG(PromptTuning):
    """pFedPG: a server-side generator of client-specific prompts, trained from the clients' prompt
    updates, with client-kept heads, on a frozen ViT (PEP-FedPT (arXiv) baseline)."""

    Params = PFedPGParams
    p: PFedPGParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        fedavg = self.p.head == "fedavg"
        # What the server broadcasts (the generated prompts, the head when averaged) and what a
        # client keeps (its id, its adapted prompt once it has trained, its head when personal).
        self.SHARED = ("prompts",) + (HEAD if fedavg else ())
        self.PERSONAL = () if fedavg else HEAD
        self._head0: State | None = None

    def build(self, backbone, head):
        return PromptNet(backbone, head, n_shallow=self.p.n_prompts)

    @property
    def keys(self) -> tuple[str, ...]:
        return ("shallow",) + HEAD  # what local adaptation trains

    def _initial_head(self) -> State:
        # The run seed, as for every personal tensor of the prompt baselines; built once, since
        # building the model per client would cost a ViT per client.
        if self._head0 is None:
            start = self.initial(self.ctx.cfg.seed)
            self._head0 = {k: start[k] for k in HEAD}
        return {k: v.clone() for k, v in self._head0.items()}

    def init_server(self, seed: int) -> tuple[State, State]:
        gen = torch.Generator().manual_seed(derive_seed(seed, "init", 2))
        a = self.p.descriptor_dim or self.dim
        dev = self.ctx.device
        generator = {"descriptors": torch.randn(self.ctx.num_clients, a, generator=gen).to(dev),
                     "keys": torch.randn(self.p.n_base, a, generator=gen).to(dev),
                     "base": vpt_uniform((self.p.n_base, self.p.n_prompts, self.dim), self.v, gen).to(dev)}
        shared = {"prompts": self.generate(generator)}
        if self.p.head == "fedavg":
            shared.update(self._initial_head())
        return shared, generator

    def init_client(self, cid: int, seed: int) -> State:
        state: State = {"client": torch.tensor(cid)}
        if self.p.head == "personal":
            state.update(self._initial_head())
        return state

    def generate(self, generator: State) -> Tensor:
        with torch.no_grad():
            return generate_prompts(generator["descriptors"], generator["keys"], generator["base"])

    def load(self, shared: State, state: State, data: ClientData | None = None, prompt: str = "generated") -> PromptNet:
        """Client k's model: its generated prompt (or its adapted one, ``prompt="adapted"``, once it
        has one) and its head."""
        net = self.net
        p = state["shallow"] if prompt == "adapted" and "shallow" in state else shared["prompts"][int(state["client"])]
        with torch.no_grad():
            net.shallow.copy_(p)
            for k in HEAD:
                net.get_parameter(k).copy_(shared[k] if self.p.head == "fedavg" else state[k])
        net.logit_bias = None
        return net

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        net = self.load(shared, state)
        sent = net.shallow.detach().clone()
        stats = self.local_train(net, self.keys, data, gen, rnd)
        adapted = net.shallow.detach().clone()
        head = {k: net.get_parameter(k).detach().clone() for k in HEAD}
        upload = {"client": state["client"].clone(), "delta": adapted - sent}
        new_state = {"client": state["client"].clone(), "shallow": adapted}
        if self.p.head == "fedavg":
            upload.update(head)
        else:
            new_state.update(head)
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        w = 1.0 / len(updates) if self.p.server_weighting == "mean" else 1.0
        generator = generator_step(server_state, [(int(u.upload["client"]), u.upload["delta"], w) for u in updates],
                                   self.p.server_lr)
        new = {**shared, "prompts": self.generate(generator)}
        if self.p.head == "fedavg":
            new.update(weighted_average([{k: u.upload[k] for k in HEAD} for u in updates], self.weights(updates)))
        return new, generator

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        return evaluate_model(self.load(shared, state, prompt=self.p.eval_prompt), data)

    def global_model(self, shared: State, server_state: State):
        return None  # every prompt is client-specific

    def personalized_model(self, shared: State, state: State):
        return PromptedSplit(copy.deepcopy(self.load(shared, state, prompt=self.p.eval_prompt)))
