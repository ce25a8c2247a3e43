"""The papers' reported numbers, quoted verbatim from the specs (``../shared/specs/*.md`` §5), so
notebooks can show them beside ours. Nothing here is computed; every table says where it is from.
"""
from .tables import beside, paper_table, paper_tables

__all__ = ["beside", "paper_table", "paper_tables"]
