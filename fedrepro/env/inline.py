"""Figures inline in notebook kernels, whatever ``MPLBACKEND`` says.

``make smoke`` and CI set ``MPLBACKEND=Agg`` so that worker processes never look for a display;
a notebook kernel started under it inherits Agg, which draws nothing into the notebook, and the
executed copy a reader opens has no plots. In a kernel a file-only backend is never what the
reader wants, so :func:`activate` switches it to matplotlib's inline backend, and :func:`show`
embeds a saved figure as a PNG if the backend is still not one that shows figures (the user chose
another one later). Interactive backends the user picked (``%matplotlib widget``, a GUI) are left
alone. Outside a kernel both do nothing; this module imports neither IPython nor matplotlib then.
"""
from __future__ import annotations

import io
import sys

INLINE = "module://matplotlib_inline.backend_inline"
# Backends that only write files: in a kernel they leave the notebook without figures.
FILE_ONLY = {"agg", "pdf", "ps", "svg", "pgf", "cairo", "template"}


def _kernel_shell():
    """The IPython shell of a Jupyter kernel this process runs, else None (a terminal IPython
    shows figures in windows and is left alone)."""
    if "ipykernel" not in sys.modules:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def _backend() -> str:
    import matplotlib

    return str(matplotlib.get_backend()).lower()


def activate() -> bool:
    """In a kernel whose matplotlib backend only writes files, switch to the inline backend (as
    ``%matplotlib inline`` does). Returns whether figures now show inline."""
    shell = _kernel_shell()
    if shell is None:
        return False
    if _backend() in FILE_ONLY:
        shell.run_line_magic("matplotlib", "inline")
    return _backend() == INLINE


def show(fig) -> None:
    """Make sure ``fig`` appears in the notebook: the inline backend draws it when the cell ends
    (pyplot's figures); under a file-only backend it is embedded here as a PNG."""
    shell = _kernel_shell()
    if shell is None:
        return
    from matplotlib._pylab_helpers import Gcf

    backend = _backend()
    managed = any(m.canvas.figure is fig for m in Gcf.get_all_fig_managers())
    if backend == INLINE and managed:  # plt.show() or the end of the cell draws it
        return
    if backend in FILE_ONLY or backend == INLINE:
        from IPython.display import Image, display

        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        display(Image(data=buf.getvalue(), format="png"))
