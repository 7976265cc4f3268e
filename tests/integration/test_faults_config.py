"""Reproductions of config and flag faults: each value here used to be accepted silently,
to crash mid-training, or to fail with a traceback or a message that did not name the flag."""
import argparse
import math
import subprocess
import sys

import pytest

from toyspt.cli.flags import parse_seeds
from toyspt.cli.main import main
from toyspt.data.tasks import TaskConfig
from toyspt.nn.model import ModelConfig
from toyspt.train.recipes import TrainConfig

# small enough that a run which should have been refused finishes in seconds
SMALL = ["--task.T", "8", "--task.n_train", "16", "--task.n_val", "8", "--task.n_test", "8",
         "--train.epochs", "1", "--train.pre_epochs", "1"]


@pytest.mark.parametrize("cls,name", [
    (TaskConfig, "shuffle_width"), (TaskConfig, "noise"), (ModelConfig, "qk_init_scale"),
    (TrainConfig, "lr"), (TrainConfig, "momentum"), (TrainConfig, "weight_decay"),
])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_numbers_are_refused_naming_the_field(cls, name, value):
    with pytest.raises(ValueError, match=rf"^{name}: expected a finite float"):
        cls(**{name: value})


@pytest.mark.parametrize("cls,kw", [
    (ModelConfig, dict(n_classes=1)),  # used to fail in cross_entropy with a traceback
    (TaskConfig, dict(seed=-1)),  # used to fail in numpy: "expected non-negative integer"
    (TaskConfig, dict(n_train=True)),  # a bool where an int is wanted
    (TaskConfig, dict(noise="0.1")),  # a string where a number is wanted (was a TypeError)
    (ModelConfig, dict(final_norm="no")),  # a string where a bool is wanted
    (TaskConfig, dict(freq_range=(1.0, 2.0, 3.0))),  # tuple of the wrong length
    (TaskConfig, dict(amp_range=(1.0,))),
])
def test_out_of_range_and_mistyped_values_are_refused_naming_the_field(cls, kw):
    (name,) = kw
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        cls(**kw)


def test_nan_shuffle_width_is_refused_before_training(tmp_path, capsys):
    # used to train and cache a task whose label carries no information, with exit 0
    assert main(["train", "--recipe", "scratch", "--cache", str(tmp_path), *SMALL,
                 "--task.shuffle_width", "nan"]) == 2
    assert capsys.readouterr().err.startswith("error: --task.shuffle_width: expected a finite float")
    assert not any(tmp_path.iterdir())


def test_one_class_model_is_refused_before_training(tmp_path, capsys):
    assert main(["train", "--recipe", "scratch", "--cache", str(tmp_path), *SMALL, "--model.n_classes", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: --model.n_classes: expected an int >= 2 and <= 8192, got 1")


@pytest.mark.parametrize("text,message", [
    ("0-1,1", "seed 1 appears twice"), ("0,0", "seed 0 appears twice"),
    ("4-0", "empty range 4-0"), ("-1", "seeds must be >= 0"), ("0,-2", "seeds must be >= 0"),
])
def test_bad_seed_lists_are_refused_with_the_reason(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_seeds(text)


def test_duplicate_seeds_are_refused_by_compare(tmp_path, capsys):
    assert main(["compare", "--recipes", "scratch", "--seeds", "0,0", "--cache", str(tmp_path), *SMALL]) == 2
    assert "seed 0 appears twice" in capsys.readouterr().err


@pytest.mark.parametrize("flag,value,message", [
    ("--task.T", "abc", "error: --task.T: expected an int, got 'abc'"),
    ("--task.band0", "a,b", "error: --task.band0: expected comma-separated ints, got 'a,b'"),
    ("--task.freq_range", "1,x", "error: --task.freq_range: expected comma-separated numbers, got '1,x'"),
    ("--train.pre_lr", "fast", "error: --train.pre_lr: expected a number or none, got 'fast'"),
    ("--task.freq_range", "1", "error: --task.freq_range: expected a tuple of 2"),
    ("--model.n_classes", "1", "error: --model.n_classes: expected an int >= 2 and <= 8192, got 1"),
])
def test_cli_value_errors_are_one_line_naming_the_flag(tmp_path, capsys, flag, value, message):
    # one convention (toyspt.cli.flags): bad input of any kind exits 2 with one line
    rc = main(["train", "--recipe", "scratch", "--cache", str(tmp_path), *SMALL, flag, value])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and err.startswith(message), err


def test_cli_value_error_end_to_end_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "toyspt.cli.main", "train", "--cache", str(tmp_path),
                           "--task.T", "abc"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr == "error: --task.T: expected an int, got 'abc'\n"


@pytest.mark.parametrize("argv,message", [
    (["train", "--task.T", "3_2"], "--task.T: expected an int in ASCII digits (0-9, no '_'), got '3_2'"),
    (["train", "--task.T", "\uff13\uff12"], "--task.T: expected an int in ASCII digits"),  # full-width 32
    (["train", "--task.T", "\u0663\u0662"], "--task.T: expected an int in ASCII digits"),  # Arabic-Indic 32
    (["train", "--task.offset", "0_5"], "--task.offset: expected a number in ASCII digits"),
    (["train", "--train.pre_lr", "\u0661e-3"], "--train.pre_lr: expected a number or none in ASCII digits"),
    (["train", "--task.band0", "1,\u0662"], "--task.band0: expected comma-separated ints"),
    (["train", "--seed", "\u0663"], "argument --seed: expected an int in ASCII digits"),
    (["compare", "--seeds", "\u0660-\u0664"], "argument --seeds: seeds must look like 0-4"),
    (["lra", "probe", "x.ckpt", "--n", "\uff11\uff16"], "argument --n: expected a positive integer in ASCII digits"),
    (["lra", "probe", "x.ckpt", "--p-mask", "0_5"], "argument --p-mask: expected a number in ASCII digits"),
])
def test_numbers_are_ascii_digits_only(tmp_path, capsys, argv, message):
    # int() and float() take these (3_2 is 32, U+0663 U+0662 is 32), a config would not show them
    assert main([*argv, "--cache", str(tmp_path)] if argv[0] != "lra" else argv) == 2
    err = capsys.readouterr().err.strip().splitlines()  # argparse's usage lines, then one error line
    assert message in err[-1] and err[-1].count("error:") == 1 and "Traceback" not in "\n".join(err), err


def test_arm_values_are_ascii_digits_only():
    from toyspt.runs import RunSpec
    from toyspt.runs.arms import arm_spec, parse_value

    with pytest.raises(ValueError, match="expected an int in ASCII digits"):
        arm_spec("scratch:T=3_2", RunSpec("scratch", 0))
    assert parse_value("-12", 0) == -12 and parse_value("1e-3", 0.1) == 1e-3 and parse_value(".5", 1.0) == 0.5
