"""The notebook that walks the paper (notebooks/attention-is-all-you-need.py), run as a reader runs it: jupytext
reads the percent-format source into a notebook, nbclient runs every cell in a fresh Python kernel, and any cell's
failed assert or error fails the test. Its figures must come out as plotly's notebook output. Skipped where the
notebook extra (pip install -e ".[notebook]") is missing or no kernel can start."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "attention-is-all-you-need.py"
PLOTLY = "application/vnd.plotly.v1+json"


def kernel_name() -> str:
    """The Python kernel nbclient starts; skips when the notebook's packages or a kernel are missing."""
    for package in ("jupytext", "nbclient", "nbformat", "ipykernel"):
        pytest.importorskip(package, reason=f"{package} is missing: pip install -e '.[notebook]'")
    from jupyter_client.kernelspec import find_kernel_specs

    if "python3" not in find_kernel_specs():
        pytest.skip("no python3 kernel is installed (python -m ipykernel install --user)")
    return "python3"


def outputs(notebook, kind: str) -> list:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs if kind in o.get("data", {})]


def test_the_notebook_runs_every_cell_and_draws_its_figures(monkeypatch):
    name = kernel_name()  # first: it skips where the notebook extra is missing
    import jupytext
    from nbclient import NotebookClient

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the kernel inherits it: one thread is fastest on a busy CPU
    notebook = jupytext.read(NOTEBOOK)
    started = time.monotonic()
    client = NotebookClient(notebook, timeout=600, kernel_name=name,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    try:
        client.execute()
    except RuntimeError as exc:  # nbclient's "Kernel died before replying", a kernel that cannot start
        if "kernel" in str(exc).lower() and "died" in str(exc).lower():
            pytest.skip(f"no kernel could run: {exc}")
        raise
    seconds = time.monotonic() - started
    figures = outputs(notebook, PLOTLY)
    assert len(figures) >= 15, f"{len(figures)} plotly figures"
    assert all(json.loads(json.dumps(f["data"][PLOTLY]))["data"] for f in figures)  # every figure has traces
    live = next(cell for cell in notebook.cells if "nb.train(" in cell.source)
    shown = [o for o in live.outputs if o["output_type"] == "display_data"]
    assert len(shown) == 4  # status, curves, samples, attention: drawn again, not appended
    frames = [o for o in outputs(notebook, "text/html") if "<iframe" in o["data"]["text/html"]]
    assert frames, "bertviz's view and the studio show as frames"
    print(f"the notebook ran in {seconds:.0f} s")


def test_the_notebook_source_is_a_paired_percent_script():
    """The .py is the source of truth (diffs read as text); the .ipynb is made from it and not committed."""
    text = NOTEBOOK.read_text(encoding="utf-8")
    assert "formats: py:percent,ipynb" in text and "# %% [markdown]" in text
    assert not NOTEBOOK.with_suffix(".ipynb").exists() or _ignored(NOTEBOOK.with_suffix(".ipynb"))


def _ignored(path: Path) -> bool:
    import subprocess

    return subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=ROOT).returncode == 0
