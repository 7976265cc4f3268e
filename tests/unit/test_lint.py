"""The linter CI runs: ``ruff check`` over the repository with the rules of pyproject.toml
(line length 120, unused imports and names, import order, undefined names)."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_passes():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    p = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def test_ruff_finds_a_planted_unused_import(tmp_path):
    """The check can fail: the same configuration flags an unused import and a long line."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\n\nx = '" + "a" * 130 + "'\n")
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    p = subprocess.run([ruff, "check", "--no-cache", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "F401" in p.stdout and "E501" in p.stdout
