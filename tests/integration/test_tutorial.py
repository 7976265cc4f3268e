"""docs/tutorial.ipynb runs from top to bottom in a fresh Jupyter kernel (nbclient and
ipykernel are in the test extra; outside CI the test skips where they are not installed)."""
import os
import time
from pathlib import Path

import pytest

if os.environ.get("CI"):
    import nbclient  # noqa: F401  (CI installs the test extra: a missing kernel is a failure there)
nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "tutorial.ipynb"


def test_tutorial_notebook_executes(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook without outputs: what it shows is made by running it"
    t0 = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    seconds = time.perf_counter() - t0
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3  # task, accuracy, profile
    print(f"docs/tutorial.ipynb executed in {seconds:.1f} s")
