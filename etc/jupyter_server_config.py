"""JupyterLab's settings under ``make lab`` (passed with ``--config``): running a notebook never
modifies a tracked file (issue 58).

JupyterLab saves a notebook as it runs (autosave), outputs and all, and the committed notebooks
are kept output-free (tests/test_site.py). Here a notebook is saved

- not at all when its cells, once their outputs are stripped, are the ones already on disk: Run All
  leaves the file's bytes as they were, whatever JupyterLab adds (cell ids, ``language_info``,
  timings) and however the file was formatted;
- with its outputs stripped (:func:`strip_outputs`, a pre-save hook of the contents manager) when
  the reader edited a cell: the edit is kept, the outputs are not;
- and in both cases as run, outputs included, under the output root
  (``output/<profile>/lab/<notebook>``, :func:`executed_copy`), where a reader finds the results
  after closing the tab.

The figures a notebook saves go under the output root too: ``make lab`` sets ``FEDREPRO_FIGURES``
(the Makefile's ``LAB_ENV``). Checked by tests/test_lab.py.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

# Cell metadata that JupyterLab writes as a cell runs or is looked at (its timings, whether its
# input or output is collapsed or scrolled): the reader's view, not the notebook.
VIEW_METADATA = ("execution", "scrolled", "collapsed", "jupyter", "tags_hidden", "trusted")


def strip_outputs(model: dict, **_) -> None:
    """The pre-save hook: a notebook ``model`` loses its outputs, execution counts and the cell
    metadata of :data:`VIEW_METADATA`, in place; any other model is left alone."""
    if model.get("type") != "notebook" or not model.get("content"):
        return
    for cell in model["content"].get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        for key in VIEW_METADATA:
            cell.get("metadata", {}).pop(key, None)


def cells_of(content: dict) -> list[tuple]:
    """What a reader wrote in a notebook: each cell's type, source and metadata, without outputs,
    ids (JupyterLab gives a cell that has none a new one) or :data:`VIEW_METADATA`."""
    out = []
    for cell in content.get("cells", []):
        source = cell.get("source", "")
        meta = {k: v for k, v in cell.get("metadata", {}).items() if k not in VIEW_METADATA}
        out.append((cell.get("cell_type"), "".join(source) if isinstance(source, list) else source,
                    repr(sorted(meta.items()))))
    return out


def executed_copy(path: str, profile: str | None = None, root: str | None = None) -> Path | None:
    """Where the executed copy of the notebook at ``path`` (relative to Lab's root, ``notebooks/``)
    goes: ``<output root>/output/<profile>/lab/<path>``; None when ``make lab`` did not set the
    output root (``FEDREPRO_OUTPUT``)."""
    root = root or os.environ.get("FEDREPRO_OUTPUT")
    if not root:
        return None
    profile = profile or os.environ.get("FEDREPRO_PROFILE") or "laptop"
    return Path(root) / "output" / profile / "lab" / path


class CleanCheckoutContentsManager(AsyncLargeFileManager):
    """JupyterLab's file manager, but a notebook that only ran is not written back, and one that the
    reader edited is written without outputs (module doc)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register_pre_save_hook(strip_outputs)

    async def save(self, model, path=""):
        path = path.strip("/")
        if model.get("type") == "notebook" and model.get("content") and path.endswith(".ipynb"):
            copy = executed_copy(path)
            if copy is not None:
                copy.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(nbformat.from_dict(model["content"]), copy)
            if await self.file_exists(path):
                on_disk = (await self.get(path, content=True, type="notebook"))["content"]
                if cells_of(on_disk) == cells_of(model["content"]):
                    self.log.info("%s: only run, not edited; left as it is%s", path,
                                  f" (executed copy: {copy})" if copy else "")
                    return await self.get(path, content=False)
        return await super().save(model, path)


if "get_config" in globals():  # as Jupyter loads it; tests/test_lab.py runs it with its own get_config
    c = get_config()  # noqa: F821
    c.ServerApp.contents_manager_class = CleanCheckoutContentsManager
