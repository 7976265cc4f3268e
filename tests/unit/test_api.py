"""The public API: every name a package exports resolves, ``import toyspt`` stays free of torch,
and the README's example needs at most three import lines."""
import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("toyspt", "toyspt.data", "toyspt.nn", "toyspt.train", "toyspt.probe", "toyspt.runs", "toyspt.ucr",
            "toyspt.lra")


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves(name):
    mod = importlib.import_module(name)
    assert mod.__all__
    for attr in mod.__all__:
        assert getattr(mod, attr) is not None, f"{name}.{attr}"
    with pytest.raises(AttributeError, match="no attribute"):
        getattr(mod, "no_such_name")


def test_import_toyspt_loads_no_torch_and_one_module_loads_no_siblings():
    code = ("import sys, toyspt; assert 'torch' not in sys.modules; from toyspt.ucr import load_ucr; "
            "import toyspt.probe.results; assert 'toyspt.probe.engine' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_readme_example_takes_at_most_three_import_lines():
    (block,) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    nodes = [n for n in ast.walk(ast.parse(block)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    lines = sum(n.end_lineno - n.lineno + 1 for n in nodes)
    assert 1 <= lines <= 3, lines
    assert all(isinstance(n, ast.ImportFrom) and n.module == "toyspt" for n in nodes)
