"""``python -m fedrepro.app.book --profile laptop``: build the site of a profile's executed notebooks."""
from __future__ import annotations

import argparse
import sys

from ...errors import FedreproError
from .builder import build
from .browser import open_pages
from .pages import MAIN_NOTEBOOK, SECTIONS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fedrepro.app.book", description=__doc__.split(":", 1)[1].strip())
    parser.add_argument("--profile", default="laptop", help="smoke | laptop (default) | paper")
    parser.add_argument("--notebooks", default=None,
                        help="the executed notebooks (default: output/<profile>/notebooks)")
    parser.add_argument("--claims", default=None, help="the recorded claims (default: output/<profile>/claims)")
    parser.add_argument("--out", default=None, help="where the site goes (default: output/<profile>/book)")
    parser.add_argument("--no-api", action="store_true", help="leave out the API reference (faster)")
    parser.add_argument("--check", action="store_true",
                        help="then open the index, each paper's page and its main notebook in headless Chromium: "
                             "console errors, images, network, claims tables; "
                             "screenshots -> output/<profile>/screenshots")
    parser.add_argument("-v", "--verbose", action="store_true", help="show Sphinx's progress")
    args = parser.parse_args(argv)

    try:
        site = build(args.profile, notebooks_dir=args.notebooks, claims_dir=args.claims, out=args.out,
                     api=not args.no_api,
                     quiet=not args.verbose)
    except FedreproError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"[book] {site / 'index.html'}")
    return _check(site, site.parent / "screenshots") if args.check else 0


def _check(site, shots) -> int:
    wanted = [site / "index.html", *sorted((site / "papers").glob("*.html")),
              *(site / "notebooks" / f"{nb}.html" for nb in MAIN_NOTEBOOK.values())]
    # A section of no paper (the backbones) lists notebooks that check no claim.
    no_claims = {(site / "papers" / f"{s}.html").resolve().as_uri() for s in SECTIONS}
    problems = 0
    for r in open_pages([p for p in wanted if p.is_file()], shots):
        bad = {"console errors": r.console_errors, "broken images": r.broken_images, "network": r.remote,
               "runs past the window's width (px)": r.overflow_px,
               "claims tables cut by their box (px hidden)": r.cut_tables_px}
        bad = {k: v for k, v in bad.items() if v}
        needs_claims = r.url not in no_claims
        problems += bool(bad) + (needs_claims and not r.has_claims_table())
        claims = ("yes" if r.has_claims_table() else "NO") if needs_claims else "not needed"
        print(f"[check] {r.url}: {r.images} images, claims table {claims}"
              + "".join(f"; {k}: {v}" for k, v in bad.items()) + f"; screenshot {r.screenshot}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
