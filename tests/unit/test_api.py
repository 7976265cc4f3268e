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


def test_a_second_checkout_imports_its_own_theory(tmp_path):
    """Code run from another checkout (a worktree training a study while this one changes) gets
    the theory/ beside its own toyspt/, not the one the editable install maps toyspt.theory to
    (a study once stopped on ModuleNotFoundError when that install's checkout had been deleted)."""
    import shutil

    shutil.copytree(ROOT / "toyspt", tmp_path / "toyspt", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "theory").mkdir()
    (tmp_path / "theory" / "__init__.py").write_text("WHERE = 'the second checkout'\n")
    (tmp_path / "theory" / "result.py").write_text("from . import WHERE\n")
    code = ("import toyspt, toyspt.theory.result as r; "
            "print(toyspt.__file__); print(r.__name__, r.WHERE); print(toyspt.theory.__file__)")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    mine = [str(tmp_path / "toyspt" / "__init__.py"), "toyspt.theory.result the second checkout",
            str(tmp_path / "theory" / "__init__.py")]
    assert p.stdout.splitlines() == mine
