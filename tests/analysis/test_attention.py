"""FedPFT's FTM attention rows: distributions over the feature and the prompts, summarised and plotted."""
import numpy as np
import pytest

import fedrepro
from fedrepro.errors import ConfigError


def test_attention_rows_are_distributions_over_feature_and_prompts(tiny):
    from fedrepro.analysis.attention import attention_rows, attention_summary, attention_table, plot_attention

    res = fedrepro.run(tiny(**{"method.name": "fedpft", "method.args": {"r_f": 1, "r_a": 1, "n_prompts": 4}}))
    rows = attention_rows(res, client=1, samples=5)
    assert rows.shape == (5, 5)  # [f, p_1..p_4]
    assert np.allclose(rows.sum(1), 1.0, atol=1e-5) and (rows >= 0).all()
    s = attention_summary(rows)
    assert s["self"] + s["prompts"] == pytest.approx(1.0, abs=1e-5)
    assert list(attention_table({"a": rows}).columns) == ["self", "prompts", "spread_across_samples"]
    fig = plot_attention({"a": rows, "b": rows})
    assert len(fig.axes) == 3  # two panels and a colour bar
    from fedrepro.env.figure_check import check

    assert check(fig) == []
    with pytest.raises(ConfigError, match="which"):
        attention_rows(res, which="sigma")
    with pytest.raises(ConfigError, match="no FTM"):
        attention_rows(fedrepro.run(tiny(**{"method.name": "fedavg"})))
