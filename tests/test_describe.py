"""Sizes quoted in notebooks' prose come from the config they run."""
from fedrepro.config import default_seeds, make_config
from fedrepro.describe import setup_markdown


def test_the_sentence_reads_every_size_from_the_config():
    smoke = setup_markdown(make_config("smoke"), default_seeds("smoke"))
    assert smoke == ("At the **smoke** profile: **4 clients** of `fashion_mnist`, each with 200 training and 50 test "
                     "images (partition `fixed_dirichlet`), model `resnet8`; **2 rounds** of 1 local epoch; "
                     "**1 seed** (0).")
    paper = setup_markdown(make_config("paper", train__participation=0.1))
    assert "**40 clients** of `cifar10`" in paper and "**1,000 rounds** of 5 local epochs" in paper
    assert "(10% of the clients each round)" in paper and "seed" not in paper


def test_the_tour_quotes_no_size_of_its_own():
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "00_tour.ipynb").read_text())
    prose = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown").lower()
    for typed in ("twenty", "20 clients", "4 clients", "few hundred"):
        assert typed not in prose, f"the tour's text says {typed!r}; print sizes with setup_markdown instead"
    assert "setup_markdown(base, SEEDS)" in "".join("".join(c["source"]) for c in nb["cells"])
