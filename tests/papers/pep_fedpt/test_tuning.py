"""PEP-FedPT's learning rates: the head's rate, then the prompts' at it, both searched on validation
data at the tuning seed for every method (fedrepro.papers.pep_fedpt.tables.lr_search)."""
from fedrepro.execute.tuning import TUNING_SEED, TuningPending
from fedrepro.papers import setup
from fedrepro.papers.pep_fedpt.tables import LR_GRID, PROMPT_LR_GRID, TABLES, CoordinateSearch, lr_search
from fedrepro.papers.pep_fedpt.variants import BASELINES


def test_the_first_search_runs_every_method_at_every_head_rate_on_validation_data(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_RUNS", str(tmp_path))  # an empty store: the first stage only
    search = lr_search("laptop")
    runs = TABLES["label_dirichlet"].search_configs("laptop")
    assert {c.method.name for c in runs} == {*BASELINES, "pep_fedpt"}
    for c in runs:
        assert (c.seed, c.data.validation, c.data.partition) == (TUNING_SEED, 0.2, "pathological")
    by_method = {m: sorted(c.train.lr for c in runs if c.method.name == m) for m in {c.method.name for c in runs}}
    assert all(v == sorted(LR_GRID["laptop"]) for v in by_method.values())
    assert search.searched(setup("pep_fedpt", "laptop", "dirichlet", method__name="head_tuning"))
    assert lr_search("paper") is None


class _Chosen:
    """A first stage whose search is stored: it chose head rate 0.03."""

    def search_configs(self, cfg):
        return []

    def searched(self, cfg):
        return True

    def choose(self, cfg):
        return cfg.replace(**{"train.lr": 0.03})


def test_the_prompt_rate_is_searched_at_the_chosen_head_rate_and_not_for_head_tuning():
    then = lr_search("laptop").then
    chain = CoordinateSearch(_Chosen(), then)
    cfg = setup("pep_fedpt", "laptop", "dirichlet", method__name="fedvpt")
    runs = chain.search_configs(cfg)
    assert sorted(c.train.prompt_lr for c in runs) == sorted(PROMPT_LR_GRID["laptop"])
    assert {c.train.lr for c in runs} == {0.03} and {c.data.partition for c in runs} == {"pathological"}
    head = setup("pep_fedpt", "laptop", "dirichlet", method__name="head_tuning")
    assert chain.search_configs(head) == []
    assert chain.choose(head).train.lr == 0.03  # the head's rate still applies


class _Pending(_Chosen):
    def choose(self, cfg):
        raise TuningPending([cfg])


def test_the_prompt_stage_waits_for_the_head_stage():
    chain = CoordinateSearch(_Pending(), lr_search("laptop").then)
    cfg = setup("pep_fedpt", "laptop", "pathological", method__name="pep_fedpt")
    assert chain.search_configs(cfg) == []
