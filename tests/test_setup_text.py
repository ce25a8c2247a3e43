"""Sizes quoted in notebooks' prose come from the config they run."""
from fedrepro.config import default_seeds, make_config
from fedrepro.app.setup_text import setup_markdown


def test_the_sentence_reads_every_size_from_the_config():
    smoke = setup_markdown(make_config("smoke"), default_seeds("smoke"), swept=["alpha"])
    assert smoke == ("At the **smoke** profile: **4 clients** of `fashion_mnist`, each with 200 training and 50 test "
                     "images (partition `fixed_dirichlet`), model `resnet8`; **2 rounds** of 1 local epoch; "
                     "**1 seed** (0).")
    shots = make_config("smoke", data__partition="pathological",
                        data__partition_args={"classes_per_client": 2, "shots": 4})
    assert "(partition `pathological`: classes_per_client=2, shots=4)" in setup_markdown(shots)
    paper = setup_markdown(make_config("paper", train__participation=0.1))
    assert "**40 clients** of `cifar10`" in paper and "**1,000 rounds** of 5 local epochs" in paper
    assert "(10% of the clients each round)" in paper and "seed" not in paper and "alpha=0.5" in paper
    # Rounds by convergence: the maximum is not what a run trains.
    flat = make_config("smoke", train__rounds=60, train__stop_when_flat=True, train__flat_from=30)
    assert "**30 rounds**, then on until flat (at most 60) of 1 local epoch" in setup_markdown(flat)
    assert "rounds until flat (at most 60)" in setup_markdown(make_config("smoke", train__rounds=60,
                                                                           train__stop_when_flat=True))


def test_the_tour_quotes_no_size_of_its_own():
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "00_tour.ipynb").read_text())
    prose = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown").lower()
    for typed in ("twenty", "20 clients", "4 clients", "few hundred"):
        assert typed not in prose, f"the tour's text says {typed!r}; print sizes with setup_markdown instead"
    assert "setup_markdown(base, SEEDS, swept=[\"alpha\"])" in "".join("".join(c["source"]) for c in nb["cells"])
