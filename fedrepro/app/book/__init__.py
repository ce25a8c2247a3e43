"""The teaching site: a static HTML book of the notebooks ``make reproduce`` executed (``make book``).

Sphinx with MyST-NB renders each executed notebook's stored outputs (its tables, with the paper's
numbers beside ours, and its figures), with a note at the top saying at which profile, commit and
on which machine it ran. Each paper gets a landing page (what it claims, every claim's verdict and
interval, its notebooks and its results page), and the API reference is generated from the
docstrings. Everything the pages load is in the site folder, so it opens offline.
"""
from .builder import SPHINX_CONFIG, build, output_root, remote_resources, stage

__all__ = ["SPHINX_CONFIG", "build", "output_root", "remote_resources", "stage"]
