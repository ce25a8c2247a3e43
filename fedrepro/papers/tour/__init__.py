"""The tour notebook (notebooks/00_tour.ipynb): Local, FedAvg and FedPer across label skew."""
from . import claims  # noqa: F401  (registers the claims)
from .notebooks import NOTEBOOKS  # noqa: F401  (the paper's notebooks, read by fedrepro.papers)

TITLE = "Tour: personalised FL under label skew"
