"""Hostile inputs at the front doors: counts with an upper bound, arms that are one run, a model
too large to store, an empty cache path, ``metadata.json`` and ``--compare-to`` read bounded and
refused in one line before any work (text in a reference's value column, a comparison with
nothing in common), inductor's cache never in the run cache, the LRA inspector's activation
hint, set and folder names longer than a file name, and a value that starts with a dash."""
from __future__ import annotations

import math
import os
import time

import pytest
from conftest import SMALL_TASK

from toyspt.cli.main import main
from toyspt.runs import RunCache, RunSpec
from toyspt.train.recipes import TrainConfig

BASE = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=1, pre_epochs=1, batch_size=64))


@pytest.fixture
def no_training(monkeypatch):
    calls = []
    monkeypatch.setattr(RunSpec, "execute", lambda self, progress=False: calls.append(self.key()))
    return calls


def one_error(capsys, needle: str) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "error" in ln]  # argparse: usage, then
    assert len(err) == 1 and needle in err[0], err  # one error line
    return err[0]


# ------------------------------------------------------------------ counts (F17, F21), --cache (F16)

@pytest.mark.parametrize("argv, needle", [
    (["--workers", "10000"], "more than 4 per CPU"),  # once 860 processes, nothing finished in 120 s
    (["--seeds", str(2 ** 63)], "above the largest seed"),  # once "Overflow when unpacking long long"
    (["--seeds", "0,2147483648"], "above the largest seed"),
    (["--cache", ""], "--cache: empty path"),  # once: the current folder became a run cache
    (["--cache", "  "], "--cache: empty path"),
])
def test_counts_and_paths_are_bounded_before_any_work(tmp_path, capsys, no_training, argv, needle):
    from toyspt.cli.figs import main as figs_main

    base = ["--out", str(tmp_path / "o")] + ([] if "--cache" in argv else ["--cache", str(tmp_path / "c")])
    assert main(["compare", "--arms", "scratch", "--train.epochs", "1", *base, *argv]) == 2
    one_error(capsys, needle)
    assert figs_main(["--quick", "--only", "task", *base, *argv]) == 2
    one_error(capsys, needle)
    assert no_training == [] and not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="empty path"):
        RunCache("")


# ------------------------------------------------------------------ arms (F22), storable (F19)

@pytest.mark.parametrize("arms, needle", [
    ("scratch,scratch:", "appears twice"),  # once: one run counted twice
    ("scratch,scratch:pos=sinusoidal", "are one run"),
    ("alibi,scratch:pos=alibi,", "appears twice"),
])
def test_two_arms_that_are_one_run_are_refused(tmp_path, capsys, no_training, arms, needle):
    assert main(["compare", "--arms", arms, "--seeds", "0", "--cache", str(tmp_path / "c")]) == 2
    one_error(capsys, needle)
    assert no_training == []


def test_a_valid_model_too_large_to_store_is_refused_before_training(tmp_path, capsys, no_training):
    from toyspt.cli.flags import check_storable

    big = ["--model.d_model", "4096", "--model.n_heads", "8", "--model.n_layers", "2", "--model.d_mlp", "8192"]
    t = time.perf_counter()
    assert main(["compare", "--arms", "scratch", "--seeds", "0", "--cache", str(tmp_path / "c"), *big]) == 2
    assert time.perf_counter() - t < 20  # once refused after 54 s of training
    one_error(capsys, "over the run cache's limit")
    assert no_training == []
    check_storable(BASE)  # the toy task's models are far below it


# ------------------------------------------------------------------ metadata.json (F15)

@pytest.mark.parametrize("kind, needle", [
    ("fifo", "is a FIFO"), ("dev_zero", "is a character device"), ("conflict", "not JSON"),
    ("list", "holds a JSON list, not an object"), ("folder", "is a directory"), ("huge", "over the limit"),
])
def test_metadata_json_is_read_bounded_and_refused_by_name(tmp_path, capsys, kind, needle):
    from toyspt.cli.figs import main as figs_main
    from toyspt.figs.metadata import Metadata

    out = tmp_path / "o"
    out.mkdir()
    meta = out / "metadata.json"
    if kind == "fifo":
        os.mkfifo(meta)  # once: a hang
    elif kind == "dev_zero":
        os.symlink("/dev/zero", meta)  # once: 5.1 GB and MemoryError
    elif kind == "conflict":
        meta.write_text('{\n<<<<<<< HEAD\n "quick": true\n=======\n "quick": false\n>>>>>>> other\n}\n')
    elif kind == "list":
        meta.write_text("[]")
    elif kind == "folder":
        meta.mkdir()
    else:
        with open(meta, "wb") as f:
            f.truncate(1 << 30)
    t = time.perf_counter()
    with pytest.raises(ValueError, match=rf"metadata.json: .*{needle}"):
        Metadata(out, True, {})
    assert time.perf_counter() - t < 1.0
    assert figs_main(["--quick", "--only", "task", "--out", str(out), "--cache", str(tmp_path / "c")]) == 2
    line = one_error(capsys, needle)
    assert "metadata.json" in line and "choose another --out" in line
    assert not (out / "task.png").exists()  # refused before any figure


# ------------------------------------------------------------------ --compare-to (F10)

def _ref(tmp_path, kind):
    ref = tmp_path / "ref"
    if kind == "missing":
        return ref
    ref.mkdir()
    if kind == "garbage":
        (ref / "a.csv").write_bytes(bytes(range(256)) * 8)
    elif kind == "text":
        (ref / "a.csv").write_text("arm,note\nspt,fine\nscratch,also\n")
    elif kind == "fifo":
        os.mkfifo(ref / "a.csv")
    return ref


@pytest.mark.parametrize("kind, needle", [
    ("missing", "no such folder"), ("empty", "holds no CSV"), ("garbage", "not a CSV"),
    ("text", "no numeric column"), ("fifo", "is a FIFO"),
])
def test_a_reference_folder_that_cannot_be_compared_with_is_one_line(tmp_path, kind, needle):
    from toyspt.cli.flags import reference_dir
    from toyspt.figs.check import CompareError, check_reference, compare_dirs

    ref = _ref(tmp_path, kind)
    for check in (check_reference, lambda r: compare_dirs(tmp_path, r)):
        with pytest.raises(CompareError, match=needle) as e:
            check(ref)
        assert "\n" not in str(e.value)
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match=needle):
        reference_dir(str(ref))


def test_plus_and_minus_infinity_never_agree(tmp_path):
    from toyspt.figs.check import compare_dirs

    for side, values in (("ref", ("inf", "nan", "inf", "1.0")), ("new", ("-inf", "nan", "inf", "1.01"))):
        (tmp_path / side).mkdir()
        rows = "".join(f"{g},{v}\n" for g, v in zip("abcd", values))
        (tmp_path / side / "x.csv").write_text("arm,value\n" + rows)
    r = compare_dirs(tmp_path / "new", tmp_path / "ref").set_index("group")
    assert r.ok.to_dict() == {"a": False, "b": True, "c": True, "d": True}  # once +inf and -inf agreed
    assert math.isinf(r.loc["a", "ref"])


def test_paper_figs_refuses_a_bad_reference_before_drawing(tmp_path, capsys):
    from toyspt.cli.figs import main as figs_main

    (tmp_path / "empty").mkdir()
    out = tmp_path / "o"
    argv = ["--quick", "--only", "task", "--out", str(out), "--cache", str(tmp_path / "c")]
    assert figs_main([*argv, "--compare-to", str(tmp_path / "empty")]) == 2
    one_error(capsys, "holds no CSV")
    assert not out.exists()  # once: the refusal came after every figure was drawn


# ------------------------------------------------------------------ --compile trusts (F0)

def test_inductor_never_keeps_its_cache_in_the_run_cache(tmp_path, monkeypatch):
    import argparse

    import toyspt.train.compiled as compiled
    from toyspt.cli.flags import numerics_of

    monkeypatch.setattr(compiled, "available", lambda: True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    cache = tmp_path / "shared-cache"
    assert numerics_of(argparse.Namespace(compile=True, cache=str(cache))) == "compiled"
    where = os.environ["TORCHINDUCTOR_CACHE_DIR"]  # once: <cache>/inductor, run by whoever shares it
    assert where == str(tmp_path / "home-cache" / "toyspt" / "inductor") and not where.startswith(str(cache))
    assert oct(os.stat(where).st_mode & 0o777) == "0o700"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    with pytest.raises(ValueError, match="lies inside the run cache"):
        numerics_of(argparse.Namespace(compile=True, cache=str(cache)))


# ------------------------------------------------------------------ LRA activation hint (F18)

def test_an_unknown_activation_hint_lists_the_honoured_ones(tmp_path, capsys):
    from toyspt.lra.checkpoint import lra_state_dict
    from toyspt.lra.lightning import write_checkpoint
    from toyspt.lra.model import LRAConfig, build_lra

    cfg = LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=64)
    write_checkpoint(tmp_path / "b.ckpt", lra_state_dict(build_lra(cfg, 0)), None)
    argv = ["lra", "inspect", str(tmp_path / "b.ckpt"), "--heads", "2", "--no-causal", "--window", "0"]
    assert main([*argv, "--activation", "gelu2"]) == 2  # once: AttributeError ... 'Refused'
    line = one_error(capsys, "activation 'gelu2'")
    assert "honoured activations" in line and "gelu" in line


def test_the_comparison_covers_the_csvs_the_run_wrote_not_the_references_other_figures(tmp_path):
    """figures/ holds every tier's figures; a run of some of them (``--only``, the default tier)
    is checked on what it drew, and a CSV it should have written but did not still fails."""
    from toyspt.figs.check import compare_dirs

    for side in ("ref", "new"):
        (tmp_path / side / "zero_mean").mkdir(parents=True)
    for name in ("a.csv", "zero_mean/a.csv", "b.csv"):  # b: a figure the run did not draw
        (tmp_path / "ref" / name).write_text("arm,value\nx,1.0\n")
    for name in ("a.csv", "zero_mean/a.csv"):
        (tmp_path / "new" / name).write_text("arm,value\nx,1.01\n")
    r = compare_dirs(tmp_path / "new", tmp_path / "ref", drawn=["a.csv", "zero_mean/a.csv"])
    assert sorted(r.file) == ["a.csv", "zero_mean/a.csv"] and r.ok.all()
    everything = compare_dirs(tmp_path / "new", tmp_path / "ref")  # every CSV of the reference expected
    assert everything.set_index("file").loc["b.csv", "note"] == "missing in the new run"
    (tmp_path / "new" / "a.csv").unlink()  # drawn but not there: still a disagreement
    r = compare_dirs(tmp_path / "new", tmp_path / "ref", drawn=["a.csv", "zero_mean/a.csv"]).set_index("file")
    assert not r.loc["a.csv", "ok"] and r.loc["a.csv", "note"] == "missing in the new run"


# ------------------------------------------------------------------ long names (F11), references and values (F12)

def test_a_set_name_longer_than_a_file_name_is_one_line(tmp_path, capsys):
    assert main(["ucr", "--list", "--dataset", "A" * 300]) == 2  # once: OSError ENAMETOOLONG, rc 1
    one_error(capsys, "not a UCR data set name: 'AAA")
    assert main(["ucr", "--list", "--dataset", "Gun\x1bPoint"]) == 2
    one_error(capsys, "not a UCR data set name")


def test_the_archive_scan_passes_over_a_folder_no_set_can_be(tmp_path, monkeypatch):
    from toyspt.ucr.archive import archive_names, scan

    (tmp_path / ("B" * 250)).mkdir()  # once: OSError ENAMETOOLONG from the scan
    (tmp_path / "Tiny").mkdir()
    (tmp_path / "Tiny" / "Tiny_TRAIN.tsv").write_text("1\t0.5\t0.25\n")
    assert archive_names(tmp_path) == ["Tiny"]
    monkeypatch.setenv("TOYSPT_UCR_ROOT", str(tmp_path))
    (row,) = scan().to_dict("records")
    assert row["name"] == "Tiny" and not row["admitted"] and "cannot be read" in row["reason"]


def test_text_in_a_reference_value_column_is_refused_before_drawing(tmp_path, capsys):
    from toyspt.cli.figs import main as figs_main
    from toyspt.figs.check import CompareError, check_reference

    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "a.csv").write_text("arm,value,acc\nspt,1.0,0.9\nscratch,2.0,oops\n")
    with pytest.raises(CompareError, match=r"column 'acc' holds numbers and text \('oops' in data row 2\)"):
        check_reference(ref)
    out = tmp_path / "o"
    argv = ["--quick", "--only", "task", "--out", str(out), "--cache", str(tmp_path / "c")]
    assert figs_main([*argv, "--compare-to", str(ref)]) == 2
    one_error(capsys, "holds numbers and text")
    assert not out.exists()  # once: refused only after every figure was drawn


def test_a_comparison_with_nothing_in_common_is_not_an_agreement(tmp_path):
    from toyspt.figs.check import compare_dirs, summary

    for side in ("ref", "new"):
        (tmp_path / side).mkdir()
    (tmp_path / "ref" / "a.csv").write_text("arm,value\nx,1.0\n")
    (tmp_path / "new" / "b.csv").write_text("arm,value\nx,1.0\n")
    report = compare_dirs(tmp_path / "new", tmp_path / "ref", drawn=["b.csv"])  # once: KeyError 'file'
    assert report.empty and "nothing compared" in summary(report)


@pytest.mark.parametrize("argv, needle", [
    (["--budget", "-1h"], "a budget must be more than 0 seconds, got '-1h'"),  # once: "expected one argument"
    (["--workers", "-2"], "must be >= 1, got -2"),
    (["--seeds", "-3"], "seeds must be >= 0"),
    (["--out"], "expected one argument (none given; a value starting with '-' reads as a flag"),
])
def test_a_value_that_starts_with_a_dash_gets_its_own_message(tmp_path, capsys, argv, needle):
    from toyspt.cli.figs import main as figs_main

    assert figs_main(["--quick", "--only", "task", "--cache", str(tmp_path / "c"), *argv]) == 2
    one_error(capsys, needle)
    assert main(["figs", "--quick", "--only", "task", "--cache", str(tmp_path / "c"), *argv]) == 2
    one_error(capsys, needle)
