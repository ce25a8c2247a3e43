"""Reading the papers' reported numbers (kept in each paper's package, ``reference.py``) as
tables, and showing them beside ours. Nothing there is computed; every table says where it is from.
"""
from .tables import beside, paper_table, paper_tables

__all__ = ["beside", "paper_table", "paper_tables"]
