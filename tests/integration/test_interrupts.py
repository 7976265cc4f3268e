"""The main job stopped at any moment: Ctrl-C exits 130 in one line with the figures written so
far intact (and metadata that lists exactly them); kill -9 loses nothing stored, and a rerun
trains nothing twice and writes the same figures as a job never stopped."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import toyspt.runs.sweeps as sweep_mod

ROOT = Path(__file__).resolve().parents[2]
ONLY = ["--quick", "--only", "task,accuracy,theory", "--seeds", "0"]


def _foreground() -> None:
    """In the child before exec: SIGINT at its default, as in a terminal's foreground job. A test
    run started in the background of a shell without job control (``pytest ... &`` in a script)
    inherits SIGINT ignored, and Python then keeps ignoring it, as a background job should."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(out: Path, cache: Path, workers: int = 2) -> subprocess.Popen:
    """paper_figs.py in its own process group (as a terminal runs it in the foreground)."""
    return subprocess.Popen([sys.executable, str(ROOT / "paper_figs.py"), *ONLY, "--out", str(out), "--cache",
                             str(cache), "--workers", str(workers)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_foreground)


def _wait_for(check, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Until ``check()``, with the job still running then (a job that ended first, as one did on a
    machine loaded by other work, is said so, not mistaken for one that ignored the signal)."""
    deadline = time.time() + timeout
    while not check():
        if proc.poll() is not None:
            break
        if time.time() > deadline:
            proc.kill()
            pytest.fail("timed out waiting for the moment to stop paper_figs.py")
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail(f"paper_figs.py ended (rc {proc.returncode}) before the moment to stop it:\n"
                    f"{proc.stderr.read()[-2000:]}")


def _entries(cache: Path) -> set[str]:
    return {p.name for p in cache.glob("??/*") if not p.name.startswith(".")}


def _rerun_counting(out: Path, cache: Path, monkeypatch) -> list[str]:
    """Rerun in this process (one worker), returning the keys of every run it trained."""
    from toyspt.cli.figs import main

    trained = []
    real = sweep_mod.train_job
    monkeypatch.setattr(sweep_mod, "train_job",
                        lambda specs, *a, **k: trained.extend(s.key() for s in specs) or real(specs, *a, **k))
    assert main([*ONLY, "--out", str(out), "--cache", str(cache), "--workers", "1"]) == 0
    return trained


def _csvs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.csv"))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The figures of the same job never stopped."""
    from toyspt.cli.figs import main

    d = tmp_path_factory.mktemp("reference")
    assert main([*ONLY, "--out", str(d / "out"), "--cache", str(d / "cache"), "--workers", "1"]) == 0
    return _csvs(d / "out")


def test_ctrl_c_exits_130_with_the_figures_written_so_far_intact(tmp_path, monkeypatch, reference):
    out, cache = tmp_path / "out", tmp_path / "cache"
    proc = _start(out, cache)
    _wait_for(lambda: (out / "task.csv").exists() and _entries(cache), proc)  # a figure written, runs stored
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err, err
    meta = json.loads((out / "metadata.json").read_text())
    written = sorted(p.stem for p in out.glob("*.png"))
    assert sorted(meta["figures"]) == written and "task" in written
    assert meta["last_run"]["interrupted"] is True
    for name in written:  # every written figure whole
        assert (out / f"{name}.pdf").stat().st_size > 0
        assert len(pd.read_csv(out / f"{name}.csv")) > 0
        assert (out / f"{name}.csv").read_bytes() == reference[f"{name}.csv"]
    assert not list(out.glob(".tmp-*"))
    stored = _entries(cache)
    trained = _rerun_counting(out, cache, monkeypatch)
    assert not set(trained) & stored, "a stored run was trained again"
    assert _csvs(out) == reference


def test_kill_9_loses_nothing_and_the_rerun_trains_nothing_twice(tmp_path, monkeypatch, reference):
    out, cache = tmp_path / "out", tmp_path / "cache"
    proc = _start(out, cache)
    _wait_for(lambda: len(_entries(cache)) >= 3, proc)  # in the middle of training
    proc.send_signal(signal.SIGKILL)  # the main process only: its workers end with it
    proc.wait(timeout=30)
    stored = _entries(cache)
    trained = _rerun_counting(out, cache, monkeypatch)
    assert not set(trained) & stored, "a stored run was trained again"
    assert _entries(cache) >= stored  # nothing lost
    assert _csvs(out) == reference
    meta = json.loads((out / "metadata.json").read_text())
    assert set(meta["figures"]) == {"task", "accuracy", "theory"} and "interrupted" not in meta["last_run"]


# Ctrl-C while the entry point's libraries load: a finder that raises KeyboardInterrupt at the
# import of torch stands for the key pressed in those seconds, at a moment that is always the same
_AT_TORCH = """
import runpy, sys
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
"""


@pytest.mark.parametrize("run", [
    "sys.argv = ['paper_figs.py', '--quick']; runpy.run_path('paper_figs.py', run_name='__main__')",
    "sys.argv = ['theory', '--quick']; runpy.run_module('theory', run_name='__main__')",
    "from toyspt.cli.main import main; sys.exit(main(['train', '--seed', '0']))",
], ids=["paper_figs", "python -m theory", "toyspt train"])
def test_ctrl_c_while_the_libraries_load_is_one_line_and_130(run, tmp_path):
    proc = subprocess.run([sys.executable, "-c", _AT_TORCH + run], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, preexec_fn=_foreground)
    assert (proc.returncode, proc.stderr) == (130, "interrupted\n"), proc.stderr[-2000:]
