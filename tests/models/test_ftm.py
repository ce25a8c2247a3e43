"""FedPFT's feature transformation module (ICLR §3.3; its size: App. N, Table 15): parameter count,
token zero of full self-attention, and the zero-out initialisation."""
import pytest
import torch

from fedrepro.models import count_params
from fedrepro.models.ftm import FTM, ftm_param_count


@pytest.mark.parametrize("m, expected", [(256, 263_168), (512, 1_050_624)])
def test_ftm_parameter_count_matches_the_communication_table(m, expected):
    assert count_params(FTM(m, residual="none")) == 4 * m * m + 4 * m == expected
    # the default adds one LayerNorm: 4m² + 6m, still 0.26M / 1.05M after rounding
    assert count_params(FTM(m)) == ftm_param_count(m) == 4 * m * m + 6 * m
    assert round(count_params(FTM(m)) / 1e6, 2) == round(expected / 1e6, 2)
    assert count_params(FTM(m, layers=2, residual="none")) == ftm_param_count(m, 2, "none") == 2 * expected


@pytest.mark.parametrize("residual, layers", [("prenorm", 1), ("none", 1), ("prenorm", 2)])
def test_ftm_output_is_token_zero_of_full_self_attention(residual, layers):
    torch.manual_seed(0)
    ftm = FTM(16, heads=4, layers=layers, residual=residual)
    f, p = torch.randn(5, 16), torch.randn(3, 16)
    out, attn = ftm(f, p, return_attention=True)
    x = torch.cat([f[:, None], p[None].expand(5, -1, -1)], 1)
    for block in ftm.blocks:  # the reference: every token attends, nothing skipped
        h = block.norm(x) if block.norm is not None else x
        a, w = block.attn(h, h, h)
        x = x + a if residual == "prenorm" else a
    assert torch.allclose(out, x[:, 0], atol=1e-5)
    assert attn.shape == (5, 4) and torch.allclose(attn, w[:, 0], atol=1e-6)
    assert torch.allclose(attn.sum(1), torch.ones(5))
    assert torch.allclose(ftm(f, p), out)


def test_zero_out_init_starts_the_ftm_as_the_identity():
    ftm = FTM(16, heads=4, init="zero_out")
    f = torch.randn(3, 16)
    assert torch.allclose(ftm(f, torch.randn(5, 16)), f)
