"""The site's own pages (MyST Markdown): the index, a landing page per paper, each paper's results
page when the generated one is missing, and the API reference.

Verdicts and intervals come from the claims the notebooks recorded (``output/<profile>/claims/``),
claim statements from the registry (``fedrepro.papers.<paper>.claims``), and what holds of each
paper from both (:func:`fedrepro.app.results_page.what_holds`); only the few sentences that
introduce each paper are written here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ..reproduce import reused_runs
from ..results_page import EFFECT_COLUMN, what_holds
from ...claims.core import CLAIMS, INTERVAL, VERDICTS, breakable_id, effect_once, recorded_claims

# What each paper is about, in a few sentences for a student; the claims themselves are listed
# from the registry beneath.
INTROS = {
    "tour": "A first look at federated learning when the clients' labels are skewed: twenty clients train "
            "alone (Local), share one model (FedAvg) or share all but the classifier (FedPer), with the skew set "
            "by a Dirichlet α. It checks two things every later paper takes for granted: sharing helps when the "
            "clients' data look alike, and a client's own model wins when they do not.",
    "fedpft": "FedPFT argues that in personalised FL the features of a shared extractor do not fit each "
              "client's own classifier. It adds personalised prompts and a feature transformation module that "
              "reshape the features for the local classifier, and trains the two parts in alternation. The "
              "claims: FedAvg's features are better than its classifier shows, FedPFT closes that gap and beats "
              "FedAvg and the usual personalised methods at every α, the prompts and the alternation each "
              "matter, and it stays robust and cheap (prompt count, partial participation, time, upload).",
    "pfedcspc": "pFedCSPC wants one model that is good on everyone's data and personalised models that are good "
                "on each client's own. The server calibrates the global head on clustered class prototypes sent "
                "by the clients; each client starts personalising from a weighted mix of the models of clients "
                "with similar labels (PMI). The claims: it beats FedAvg globally and FedAvg-FT locally at once, "
                "every piece of the method adds accuracy, it needs fewer rounds, and it plugs into FedProx and MOON.",
    "pep_fedpt": "PEP-FedPT tunes prompts of a frozen vision transformer across clients. Beside one shared "
                 "prompt, each sample gets a mix of class-specific prompts weighted by its similarity to class "
                 "prototypes and by the client's class priors, so a single global model copes with label skew. "
                 "The claims: that mix beats a shared prompt by a wide margin on pathological splits, the priors "
                 "carry most of the gain, held-out clients keep their accuracy and noise for privacy costs little.",
    "fedotp": "FedOTP gives every client a shared global prompt and a private local prompt for CLIP, and "
              "matches image patches to the prompts with unbalanced optimal transport (γ sets how much mass must "
              "move). The claims: it beats a single shared prompt (PromptFL) under every kind of label and "
              "feature shift, more so as the skew grows; both prompts are needed; unbalanced transport is at "
              "least as good as classical transport or averaging; and its plan concentrates on the objects.",
}
PAPER_ORDER = ("fedpft", "pfedcspc", "pep_fedpt", "fedotp")
# Notebook folders that are not a paper's: their page's title and text.
SECTIONS = {"backbones": ("Backbones", "The small pretrained stand-ins that the prompt papers' notebooks run on at the "
                                       "smoke and laptop profiles: how each is built and what it can do.")}
# The notebook each paper's page points a student to first.
MAIN_NOTEBOOK = {"tour": "00_tour", "fedpft": "fedpft/03_main_tables",
                 "pfedcspc": "pfedcspc/01_global_and_personalized",
                 "pep_fedpt": "pep_fedpt/01_label_heterogeneity", "fedotp": "fedotp/01_label_shift"}


@dataclass(frozen=True)
class ClaimRow:
    paper: str
    claim_id: str
    source: str
    statement: str
    verdict: str
    interval: str
    evidence: str
    notebook: str | None  # the record's name, e.g. "fedpft_03_main_tables" or "00_tour"
    effect: str = ""  # the deciding test's mean and requirement in the claim's words (Test.words)

    @property
    def said(self) -> str:
        """The effect said once (:func:`fedrepro.claims.core.effect_once`)."""
        return effect_once(self.effect, self.interval)


def cell(text) -> str:
    """``text`` made safe for one cell of a Markdown table."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def collect(claims_dir: Path) -> list[ClaimRow]:
    """Every registered claim with the verdict the notebooks recorded in ``claims_dir`` (NOT RUN for a
    claim no notebook has checked)."""
    from ...papers.verdicts import registered

    registered()
    checked = recorded_claims(claims_dir)
    rows = []
    for name in CLAIMS.names():
        c = CLAIMS.get(name)
        r = checked.get(name, {})
        rows.append(ClaimRow(paper=c.paper, claim_id=c.id, source=r.get("source", c.source),
                             statement=r.get("statement", c.statement), verdict=r.get("verdict", "NOT RUN"),
                             interval=r.get("interval") or "", evidence=r.get("evidence",
                                                                              "no notebook has checked it yet"),
                             notebook=r.get("notebook"), effect=r.get("effect") or ""))
    return rows


def notebook_doc(record: str | None, docs: set[str]) -> str | None:
    """The page (docname) of the notebook that recorded a claim: records are named ``<paper>_<stem>``
    for a paper's notebook and ``<stem>`` for a top-level one."""
    if not record:
        return None
    candidates = [f"notebooks/{record}"]
    head, _, tail = record.partition("_")
    while tail:
        candidates.append(f"notebooks/{head}/{tail}")
        more, _, tail = tail.partition("_")
        head = f"{head}_{more}"
    return next((c for c in candidates if c in docs), None)


def holds(paper: str, rows: list[ClaimRow]) -> str:
    """What holds of ``paper`` and what does not (:func:`fedrepro.app.results_page.what_holds`)."""
    return what_holds(paper, [asdict(r) for r in rows if r.paper == paper])


def verdict_counts(rows: list[ClaimRow], papers: list[str]) -> list[str]:
    """The verdict counts of each of ``papers`` (linked to its page) and of them all, as a Markdown table."""

    lines = ["| paper | claims | " + " | ".join(VERDICTS) + " |", "|---|---|" + "---|" * len(VERDICTS)]
    for paper in papers:
        mine = [r for r in rows if r.paper == paper]
        link = f"{{doc}}`{paper} <papers/{paper}>`"
        lines.append(f"| {link} | {len(mine)} | " + " | ".join(str(sum(r.verdict == v for r in mine)) for v in VERDICTS)
                     + " |")
    shown = [r for r in rows if r.paper in papers]
    counts = " | ".join(str(sum(r.verdict == v for r in shown)) for v in VERDICTS)
    lines.append(f"| all | {len(shown)} | {counts} |")
    return lines


def index_page(profile: str, rows: list[ClaimRow], papers: list[str], top: list[str], report: dict | None,
               machine: str | None, api: bool = True) -> str:
    """The site's front page: what it is, how the pass ran, the verdict counts, the table of contents
    (``papers``' landing pages, then the pages of ``top``, then the API reference)."""

    lines = ["# fedrepro: four federated-learning papers, reproduced", "",
             "Course material you can read without running anything. Every page below is a notebook that "
             f"`make reproduce` executed at the **{profile}** profile, with its tables (the paper's numbers "
             "beside ours), its figures and the verdict on each of the paper's claims. Open the tour first; "
             "each paper's page says what the paper claims and which notebook checks what.", ""]
    if report:
        n = len(report.get("notebooks", []))
        reused = reused_runs(report)
        lines += [f"The pass: {n} notebook{'s' if n != 1 else ''} at commit `{report.get('commit')}` on "
                  f"{machine}, {report.get('wall_s', 0) / 60:.1f} min of wall time"
                  + (f" ({reused} of its {report['runs_planned']} runs were stored already and reused)" if reused
                     else "") + ".", ""]
    lines += ["## What holds", "", *(f"- {{doc}}`{p} <papers/{p}>`: {holds(p, rows)}" for p in papers), "",
              "## Verdicts", "",
              f"Each claim measures an effect once per seed; the interval is {INTERVAL}. **PASS**: the whole "
              "interval clears the claim's bound; **FAIL**: it falls short of it; **INCONCLUSIVE**: it straddles "
              "the bound; **UNTESTABLE**: the claim requires a gain larger than the room its control "
              "leaves at this profile.", "", *verdict_counts(rows, papers), ""]
    toc = [*(f"papers/{p}" for p in papers), *top, *(["api"] if api else [])]
    lines += ["```{toctree}", ":maxdepth: 1", ":caption: Contents", "", *toc, "```", ""]
    return "\n".join(lines)


def paper_page(paper: str, title: str, rows: list[ClaimRow], notebook_docs: list[str], results_doc: str,
               docs: set[str]) -> str:
    """A paper's landing page: what it claims, each claim's verdict and interval, its notebooks."""
    mine = [r for r in rows if r.paper == paper]
    main = f"notebooks/{MAIN_NOTEBOOK[paper]}" if paper in MAIN_NOTEBOOK else None
    lines = [f"# {title}", "", INTROS.get(paper, ""), "", f"**What holds.** {holds(paper, rows)}", ""]
    if main in docs:
        lines += [f"Start with {{doc}}`the main notebook </{main}>`; it ends with things to try.", ""]
    who = "it" if paper == "tour" else "the paper"
    lines += [f"## What {who} claims, and what we found", "",
              f"Every claim with its verdict and interval at this profile; the {{doc}}`results page </{results_doc}>` "
              "adds the evidence behind each. The notebook that checked a claim shows the figures of it.", "",
              f"| claim | statement | source | verdict | {EFFECT_COLUMN} | checked in (its figures) |",
              "|---|---|---|---|---|---|"]
    for r in mine:
        doc = notebook_doc(r.notebook, docs)
        where = f"{{doc}}`{r.notebook} </{doc}>`" if doc else cell(r.notebook or "")
        verdict = f"**{r.verdict}**" if r.verdict != "NOT RUN" else r.verdict
        lines.append(f"| {breakable_id(r.claim_id)} | {cell(r.statement)} | {cell(r.source)} | {verdict} | "
                     f"{cell(r.said)} | {where} |")
    lines += ["", "## Notebooks", "", "```{toctree}", ":maxdepth: 1", "", *(f"/{d}" for d in notebook_docs),
              f"/{results_doc}", "```", ""]
    return "\n".join(lines)


def section_page(title: str, text: str, notebook_docs: list[str]) -> str:
    """A landing page for notebooks that belong to no paper (the backbone stand-ins)."""
    return "\n".join([f"# {title}", "", text, "", "```{toctree}", ":maxdepth: 1", "",
                      *(f"/{d}" for d in notebook_docs), "```", ""])


def results_page(paper: str, profile: str, rows: list[ClaimRow]) -> str:
    """A paper's results page from the recorded claims, for when the generated one
    (``fedrepro.app.results_page``) is not there: every claim's verdict, interval and evidence."""
    lines = [f"# {paper}: results at the {profile} profile", "", f"**What holds.** {holds(paper, rows)}", "",
             f"Every claim's verdict, interval and evidence as the notebooks recorded them "
             f"(`output/{profile}/claims/*.json`).", "",
             f"| claim | statement | verdict | {EFFECT_COLUMN} | evidence |", "|---|---|---|---|---|"]
    for r in rows:
        if r.paper == paper:
            lines.append(f"| {breakable_id(r.claim_id)} | {cell(r.statement)} | {r.verdict} | {cell(r.said)} "
                         f"| {cell(r.evidence)} |")
    return "\n".join(lines) + "\n"


# The packages the API reference documents, with every module under them.
API_MODULES = ("fedrepro",)


def api_page() -> str:
    """The API reference: autosummary's pages for every module of :data:`API_MODULES`, from their docstrings."""
    return "\n".join(["# API reference", "", "Generated from the docstrings of the `fedrepro` package.", "",
                      "```{eval-rst}", ".. autosummary::", "   :toctree: api", "   :recursive:", "",
                      *(f"   {m}" for m in API_MODULES), "```", ""])
