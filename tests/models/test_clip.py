"""The open_clip adapter: CoOp text encoder, per-token image embeddings, and the paper-size weights path."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("open_clip")

from fedrepro.errors import ConfigError
from fedrepro.models.clip import (
    CoOpPrompts,
    StandinArch,
    bpe_tokenizer,
    build_paper_clip,
    build_standin,
    load_clip,
    load_weights,
    read_state_dict,
)

SMALL = StandinArch(vision_width=32, vision_layers=2, vision_head_width=16, text_width=32, text_layers=2, embed_dim=32)


@pytest.fixture(scope="module")
def clip():
    return build_standin(SMALL, None, seed=0)


def _images(clip, n=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return clip.preprocess(torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=g))


def _template_context(clip, words: str) -> torch.Tensor:
    ids = torch.tensor(clip.word_ids(words))
    return clip.model.token_embedding(ids)


def _check_coop_reproduces_encode_text(clip, classes=("trouser", "ankle boot"), template="a photo of a"):
    ctx = _template_context(clip, template)
    coop = CoOpPrompts(clip, list(classes), n_ctx=len(ctx), n_prompts=2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        coop.ctx[1] = ctx
        feats = coop()
        # open_clip's own tokenizer and encode_text: an independent path for SOS/EOS, positions, mask, pooling.
        tokens = bpe_tokenizer()([f"{template} {c}." for c in classes], context_length=clip.context_length)
        if clip.vocab_ids is not None:  # BPE id -> row of the reduced embedding
            tokens = torch.searchsorted(clip.vocab_ids, tokens)
        ref = clip.model.encode_text(tokens.to(ctx.device))
    assert feats.shape == (2, len(classes), clip.embed_dim)
    torch.testing.assert_close(feats[1], ref, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(feats[0], ref, atol=1e-3)  # the random prompt differs


def test_coop_with_template_context_reproduces_encode_text(clip):
    _check_coop_reproduces_encode_text(clip)


def test_only_the_context_is_trainable(clip):
    coop = CoOpPrompts(clip, ["bag", "coat", "dress"], n_ctx=4, n_prompts=2, generator=torch.Generator().manual_seed(1))
    assert [n for n, p in coop.named_parameters() if p.requires_grad] == ["ctx"]
    assert coop.ctx.shape == (2, 4, clip.text_width)
    coop().sum().backward()
    assert coop.ctx.grad is not None and coop.ctx.grad.abs().sum() > 0
    assert all(p.grad is None for n, p in coop.named_parameters() if n != "ctx")


def test_context_init_is_seeded(clip):
    a, b = (CoOpPrompts(clip, ["bag"], 4, generator=torch.Generator().manual_seed(3)) for _ in range(2))
    assert torch.equal(a.ctx, b.ctx)


def test_too_long_prompt_is_refused(clip):
    with pytest.raises(ConfigError, match="n_ctx"):
        CoOpPrompts(clip, ["bag"], n_ctx=clip.context_length, generator=torch.Generator())


def test_encode_text_matches_open_clip(clip):
    texts = ["the digit 7", "a photo of a sneaker."]
    tokens = bpe_tokenizer()(texts, context_length=clip.context_length)
    assert torch.equal(clip.tokenize(texts), tokens)
    torch.testing.assert_close(clip.encode_text(texts), clip.model.encode_text(tokens))


def test_image_tokens_shape_and_cls_equals_pooled(clip):
    x = _images(clip)
    with torch.no_grad():
        tokens = clip.image_tokens(x)
        pooled = clip.encode_image(x)
    m = (SMALL.image_size // SMALL.patch_size) ** 2
    assert tokens.shape == (2, 1 + m, SMALL.embed_dim)
    torch.testing.assert_close(tokens[:, 0], pooled)


def test_preprocess_repeats_grey_and_resizes(clip):
    grey = torch.full((1, 1, 14, 14), 255, dtype=torch.uint8)
    x = clip.preprocess(grey)
    assert x.shape == (1, 3, 28, 28)
    torch.testing.assert_close(x, torch.ones_like(x))  # (1 - 0.5) / 0.5
    with pytest.raises(ConfigError, match="uint8"):
        clip.preprocess(grey.float())


def test_reduced_vocabulary_gives_the_same_features():
    full = build_standin(SMALL, None, seed=0)
    words = ["a photo of a trouser.", "the digit 7"]
    tok = bpe_tokenizer()
    keep = sorted({0, tok.sot_token_id, tok.eot_token_id, *(i for w in words for i in tok.encode(w))})
    small = build_standin(SMALL, torch.tensor(keep), seed=0)
    state = full.model.state_dict()
    state["token_embedding.weight"] = state["token_embedding.weight"][keep]
    load_weights(small, state)
    torch.testing.assert_close(small.encode_text(words), full.encode_text(words))
    _check_coop_reproduces_encode_text(small, classes=("trouser",))
    with pytest.raises(ConfigError, match="vocabulary"):
        small.tokenize(["a photo of a sandal"])


def test_logit_scale_is_clips(clip):
    assert clip.logit_scale() == pytest.approx(1 / 0.07, rel=1e-5)


@pytest.mark.parametrize("layout", ["plain", "training", "safetensors"])
def test_checkpoint_layouts_load(tmp_path, clip, layout):
    state = clip.model.state_dict()
    if layout == "plain":
        path = tmp_path / "model.pt"
        torch.save(state, path)
    elif layout == "training":  # open_clip's training checkpoints: DDP prefixes under "state_dict"
        path = tmp_path / "epoch_32.pt"
        torch.save({"epoch": 32, "state_dict": {f"module.{k}": v for k, v in state.items()}}, path)
    else:
        from safetensors.torch import save_file

        path = tmp_path / "open_clip_model.safetensors"
        save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    loaded = read_state_dict(path)
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_wrong_weights_name_the_keys(clip):
    other = build_standin(StandinArch(text_layers=1), None, seed=0)
    with pytest.raises(ConfigError, match="missing"):
        load_weights(clip, other.model.state_dict())


def test_missing_weights_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.pt"):
        read_state_dict(tmp_path / "nothing.pt")


@pytest.mark.parametrize("arch, tokens, dim", [("ViT-B-16", 1 + 196, 512), ("RN50", 1 + 49, 1024)])
def test_paper_size_clip_loads_official_layout(tmp_path, arch, tokens, dim):
    """Full-size architecture, random weights saved as OpenAI ships them (fp16, open_clip key names)."""
    source = build_paper_clip(arch, "openai", seed=1)
    state = {k: v.half() for k, v in source.model.state_dict().items()}
    del source
    path = tmp_path / f"{arch}.pt"
    torch.save(state, path)
    clip = load_clip(arch, path, source="openai")
    loaded = clip.model.state_dict()
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], state[k].float()) for k in state)
    x = clip.preprocess(torch.randint(0, 256, (1, 1, 28, 28), dtype=torch.uint8, generator=torch.Generator()))
    assert x.shape == (1, 3, 224, 224)
    with torch.no_grad():
        out = clip.image_tokens(x)
        assert out.shape == (1, tokens, dim)
        torch.testing.assert_close(out[:, 0], clip.encode_image(x), rtol=1e-4, atol=1e-4)
    _check_coop_reproduces_encode_text(clip, classes=("trouser",))


class _Scripted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.logit_scale = torch.nn.Parameter(torch.tensor(4.6))
        self.register_buffer("input_resolution", torch.tensor(224))  # as in OpenAI's archives

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.logit_scale


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning")
def test_torchscript_archive_is_read_like_openais(tmp_path):
    path = tmp_path / "RN50.pt"
    torch.jit.script(_Scripted()).save(str(path))
    state = read_state_dict(path)
    assert list(state) == ["logit_scale"]
    assert state["logit_scale"].item() == pytest.approx(4.6)
