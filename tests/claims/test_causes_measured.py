"""A cause that blames the budget, the scale or the stand-in names what was measured (issue 54): "not a
budget artefact" only on a longer run of the same configs, never on flat curves alone; a φ-epoch budget
read off the runs' configs, not typed."""
import itertools

import pandas as pd
import pytest

import fedrepro
from fedrepro.claims.core import UNTESTABLE
from fedrepro.errors import ConfigError
from fedrepro.papers import setup
from fedrepro.papers.diagnose import (ATTRIBUTING, LONGER_FACTOR, Arm, Cause, ExtractorBudget, Longer, Movement,
                                      cause_details, cause_of, causes, claim_methods, extractor_budget,
                                      extractor_epochs, longer_runs, save_longer)
from tests.support import tiny_config

SEEDS = "seeds [0, 1, 2]"
FAIL_AT = "FedPFT (α=1.0) − FedAvg: {:+.2f} pts [-2.86, +0.33], required > +2.08 pts"


def _longer(last: int, verdicts=("FAIL",) * 3, budget: int = 50) -> Longer:
    rounds = [budget, (budget + last) // 2, last]
    effects = (-1.27, -0.87, -0.67)
    return Longer("fedpft_rounds_pilot", budget, tuple((r, v, FAIL_AT.format(e))
                                                       for r, v, e in zip(rounds, verdicts, effects)))


UNEQUAL = ExtractorBudget((Arm("fedpft", 1.0, (50, 50), (50, 50), 1, True), Arm("fedper", 5.0, (250, 250),
                                                                                  (50, 50), 1, False)))
EQUAL = ExtractorBudget((Arm("fedpft", 5.0, (250, 250), (50, 50), 0, True), Arm("fedper", 5.0, (250, 250),
                                                                                 (50, 50), 0, False)))
# Words that put a verdict on the budget, the scale or the stand-in.
BLAMING = ("not a budget artefact", "budget:", "scale", "stand-in", "φ-epoch budget")


@pytest.mark.parametrize("verdict", ["FAIL", "INCONCLUSIVE", UNTESTABLE])
def test_every_cause_that_blames_budget_scale_or_stand_in_names_its_measurement(verdict):
    moves = [None, Movement(6, 0, 0.001), Movement(6, 2, 0.03), Movement(10, 3, 0.022, "it compares", 0.06)]
    changes = [None, (0, 20, 0), (8, 20, 0), (12, 20, 0), (19, 20, 1), (19, 20, 3)]
    longers = [None, _longer(75), _longer(100), _longer(100, ("FAIL", "FAIL", "INCONCLUSIVE"))]
    rooms = ["", "required +3.00 pts against a room of +1.37 pts (ceiling 100.00 − R_f=0 98.63)"]
    seen = set()
    for moved, changed, longer, phi, room in itertools.product(moves, changes, longers, [None, UNEQUAL, EQUAL], rooms):
        cause = cause_of(verdict, SEEDS, moved, changed, 5.48, 3, longer, phi, room)
        seen.add(cause.kind)
        blames = [w for w in BLAMING if w in cause.text]
        if cause.kind in ATTRIBUTING or blames:  # "budget not ruled out" blames nothing
            assert cause.measurement and cause.measurement in cause.text, cause
        if "not a budget artefact" in cause.text:
            # Only on a run of the same configs to 2× the rounds or more, which it names with its effects.
            assert longer is not None and longer.last >= LONGER_FACTOR * longer.budget and longer.held
            assert "trained to 100 rounds" in cause.text and "FAIL at 50 rounds (-1.27 pts)" in cause.text
    expected = {"FAIL": {"budget", "noise", "budget not ruled out", "not a budget artefact", "φ-epoch budget"},
                "INCONCLUSIVE": {"budget", "noise", "seeds"}, UNTESTABLE: {"", "untestable"}}[verdict]
    assert expected <= seen


def test_a_fail_with_only_a_flatness_check_is_not_cleared_of_its_budget():
    flat = Movement(6, 0, 0.001, "it compares")
    for changed in (None, (0, 20, 0), (5, 20, 0)):
        cause = cause_of("FAIL", SEEDS, flat, changed)
        assert cause.kind == "budget not ruled out" and "not a budget artefact" not in cause.text, cause
        assert cause.text.startswith("budget not ruled out: no longer run measured (the 6 runs it compares are flat")
        assert "scale" not in cause.text
    # A run to 1.5× the budget is no longer run by the rule: it does not clear the budget either.
    assert cause_of("FAIL", SEEDS, flat, None, longer=_longer(75)).kind == "budget not ruled out"


def test_a_longer_run_that_still_fails_clears_the_budget_and_names_the_effect_at_each_budget():
    cause = cause_of("FAIL", SEEDS, Movement(6, 0, 0.001), None, longer=_longer(100))
    assert cause.kind == "not a budget artefact"
    assert cause.text == ("not a budget artefact up to 100 rounds: the claim read on runs of the same configs "
                          "trained to 100 rounds (2× the 50-round budget; `fedpft_rounds_pilot`): FAIL at 50 rounds "
                          "(-1.27 pts), FAIL at 75 rounds (-0.87 pts), FAIL at 100 rounds (-0.67 pts); the effect "
                          "moved +0.60 pts from 50 to 100 rounds")
    # Even where the budget's own runs still move: the longer run is the measurement.
    assert cause_of("FAIL", SEEDS, Movement(6, 2, 0.03), (19, 20, 1), longer=_longer(100)).kind == \
        "not a budget artefact"
    # One whose verdict changes past the budget is budget, with the same numbers.
    changed = cause_of("FAIL", SEEDS, Movement(6, 0, 0.001), None, longer=_longer(100, ("FAIL", "FAIL", "PASS")))
    assert changed.kind == "budget" and changed.text.startswith("budget: the claim read on runs") and \
        "PASS at 100 rounds" in changed.text
    # An INCONCLUSIVE is about seeds whatever the longer run says.
    assert cause_of("INCONCLUSIVE", SEEDS, Movement(6, 0, 0.001), None, longer=_longer(100)).kind == "seeds"


def test_a_cause_that_blames_the_budget_without_a_measurement_cannot_be_made():
    for kind in ATTRIBUTING:
        with pytest.raises(ConfigError, match="names no measurement"):
            Cause(kind, f"{kind}: the effect is absent at this profile's scale")
    with pytest.raises(ConfigError, match="invalid cause kind"):
        Cause("scale", "x", "y")
    assert str(Cause("seeds", "seeds: x")) == "seeds: x"


def test_the_phi_epoch_budget_is_said_with_each_arms_numbers_where_the_methods_is_fewer():
    cause = cause_of("FAIL", SEEDS, Movement(6, 0, 0.001, "it compares"), None, extractor=UNEQUAL)
    assert cause.kind == "φ-epoch budget"
    assert cause.text.startswith(
        "φ-epoch budget: the method's feature extractor trains on the classification loss for fewer epochs than the "
        "baselines it is compared with, read off their configs: fedpft 1 a round (50 over its 50 rounds, 1 SGD step a "
        "round), fedper 5 a round (250 over its 50 rounds, 5 SGD steps a round); no longer run measured")
    assert cause_of("FAIL", SEEDS, Movement(6, 0, 0.001), None, extractor=EQUAL).kind == "budget not ruled out"
    # A method with more φ epochs than its baselines is not short of them.
    richer = ExtractorBudget((Arm("fedpft", 5.0, (250, 250), (50, 50), 0, True),
                              Arm("fedrep", 1.0, (50, 50), (50, 50), 0, False)))
    assert not richer.applies
    # Where the claim names no method (settings of one method), unequal budgets are reported as such.
    settings = ExtractorBudget((Arm("fedpft (alternate=True)", 1.0, (50, 50), (50, 50)),
                                Arm("fedpft (alternate=False)", 5.0, (250, 250), (50, 50))))
    assert settings.applies and "for unequal epochs" in settings.text()
    # Beside a measured longer run it is said too.
    both = cause_of("FAIL", SEEDS, None, None, longer=_longer(100), extractor=UNEQUAL)
    assert both.kind == "not a budget artefact" and "; φ-epoch budget: the method's" in both.text


def test_phi_epochs_are_read_off_the_methods_schedules_in_the_configs():
    """FedPFT's φ trains R_a = 1 epoch a round, its baselines R = 5: 50 against 250 over the laptop's 50 rounds
    (the audit's numbers), read off each method's own schedule and the config, so a changed schedule moves them."""
    base = setup("fedpft", "laptop")
    rounds = base.train.rounds

    def epochs(name, args=None, **over):
        return extractor_epochs(base.replace(**{"method.name": name, "method.args": args or {}, **over}), rounds)

    assert rounds == 50 and base.train.local_epochs == 5
    assert epochs("fedpft") == 50 and epochs("fedper") == epochs("fedbn") == epochs("fedavg") == 250
    assert epochs("fedpft", {"r_f": 1, "r_a": 4}) == 200  # the audit's (1, 4) arm
    assert epochs("fedpft", {"alternate": False}) == 250  # ICLR Table 4's Setting II trains φ every epoch
    assert epochs("fedrep", {"head_epochs": 4, "body_epochs": 1}) == 50
    assert epochs("fedrep", {"body_epochs": None}) == 250
    assert epochs("fedavg_linear", {"alternate": True}) == 50 and epochs("fedavg_linear", {"alternate": False}) == 250
    assert epochs("fedpft_con", **{"data.partition_args.alpha": 0.1}) == 100  # (R_f, R_a) = (3, 2) at α ≤ 0.1
    assert epochs("fedpft_two_stage") == 25  # none in its contrastive half
    assert epochs("fedavg", **{"train.local_epochs": 2}) == 100
    assert epochs("fedrod") is None  # a schedule this does not read is not guessed
    assert claim_methods("fedpft.beats_fedper_fedrep_fedbn") == {"fedpft"}
    assert claim_methods("fedpft.alternation_matters") == frozenset()  # settings, not methods
    assert claim_methods("no.such_claim") == frozenset()


def test_causes_read_longer_runs_and_the_phi_budgets_of_the_stored_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    runs = tmp_path / "runs"
    pft = tiny_config(tmp_path, **{"train.rounds": 2, "method.name": "fedpft",
                                   "method.args": {"r_f": 1, "r_a": 1, "n_prompts": 2, "ftm_heads": 1}})
    avg = tiny_config(tmp_path, **{"train.rounds": 2, "method.name": "fedavg", "train.local_epochs": 2})
    for cfg in (pft, avg):
        fedrepro.run(cfg)
    budget = extractor_budget([pft.hash(), avg.hash(), "0" * 16], runs, frozenset({"fedpft"}))
    assert budget.applies and [a.label for a in budget.arms] == ["fedpft", "fedavg"]
    assert "fedpft 1 a round (2 over its 2 rounds), fedavg 2 a round (4 over its 2 rounds)" in budget.text()

    table = pd.DataFrame([{"claim_id": "fedpft.beats_fedavg_every_alpha", "verdict": "FAIL", "evidence": SEEDS,
                           "notebook": None, "runs": [pft.hash(), avg.hash()]},
                          {"claim_id": "fedpft.beats_fedper_fedrep_fedbn", "verdict": "FAIL", "evidence": SEEDS,
                           "notebook": None, "runs": []},
                          {"claim_id": "fedpft.rf_sweep_rises", "verdict": UNTESTABLE, "evidence": SEEDS,
                           "notebook": None, "runs": [], "room": "required +3.00 pts against a room of +1.37 pts"}])
    details = cause_details("laptop", table, runs_dir=runs, root=tmp_path)
    assert details[0].kind == "φ-epoch budget" and "fedpft 1 a round" in details[0].text
    assert details[1] == Cause("", "")  # nothing stored to read, nothing measured: no cause
    assert details[2].kind == "untestable" and "+1.37 pts" in details[2].text

    # A rounds pilot's longer run clears the budget of the claim it read, and of no other.
    verdicts = pd.DataFrame([{"round": r, "claim_id": "fedpft.beats_fedavg_every_alpha", "verdict": "FAIL",
                              "interval": FAIL_AT.format(e)} for r, e in ((50, -1.27), (100, -0.67))])
    path = save_longer(verdicts, "fedpft_rounds_pilot", "laptop", 50)
    assert path.parent == tmp_path / "output" / "laptop" / "claims" / "longer"
    assert longer_runs("laptop", tmp_path)["fedpft.beats_fedavg_every_alpha"].measured
    out = causes("laptop", table, runs_dir=runs, root=tmp_path)
    assert out[0].startswith("not a budget artefact up to 100 rounds: the claim read on runs of the same configs "
                             "trained to 100 rounds (2× the 50-round budget; `fedpft_rounds_pilot`): FAIL at 50 "
                             "rounds (-1.27 pts), FAIL at 100 rounds (-0.67 pts)")
    assert "φ-epoch budget" in out[0] and out[1] == ""
    with pytest.raises(ConfigError, match="budget"):
        save_longer(verdicts, "x", "laptop", 0)
    with pytest.raises(ConfigError, match="no cut at or past budget=200"):
        save_longer(verdicts, "x", "laptop", 200)


def test_a_cause_a_claim_declares_that_blames_the_stand_in_scale_or_budget_cites_its_measurement():
    """A claim's own likely cause replaces the one read off the runs on its page, so it is held to the same
    rule: one that blames the stand-in, the scale or the budget cites where it was measured (a notebook, a
    bench record or a page of docs)."""
    import re

    from fedrepro.papers.verdicts import registered

    reg = registered()
    declared = {n: reg.get(n).likely_cause for n in reg.names() if reg.get(n).likely_cause}
    blaming = {n: c for n, c in declared.items() if re.search(r"stand-in|scale|budget", c)}
    assert blaming  # the rule below reads something
    assert not [n for n, c in blaming.items() if not re.search(r"notebook \d+|bench/\S+|docs/\S+", c)]
