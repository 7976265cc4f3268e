import json

import pandas as pd
import pytest

from toyspt.cli.flags import parse_seeds
from toyspt.cli.main import main

SMALL = ["--task.T", "16", "--task.n_train", "64", "--task.n_val", "32", "--task.n_test", "32",
         "--train.epochs", "1", "--train.pre_epochs", "1"]


def test_parse_seeds():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("1,3,5-6") == [1, 3, 5, 6]
    with pytest.raises(Exception, match="seeds"):
        parse_seeds("a-b")


def test_train_prints_summary(tmp_path, capsys):
    assert main(["train", "--recipe", "spt", "--seed", "1", "--cache", str(tmp_path), *SMALL]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out[out.index("{\n"):])
    assert summary["recipe"] == "spt" and 0 <= summary["test_at_peak"] <= 1


def test_compare_writes_csv_and_json(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "--recipes", "scratch,alibi", "--seeds", "0-1", "--cache", str(tmp_path / "c"),
                 "--out", str(out), *SMALL]) == 0
    table = pd.read_csv(out / "compare.csv")
    assert list(table.arm) == ["scratch", "alibi"] and (table.seeds == 2).all()
    blob = json.loads((out / "compare.json").read_text())
    assert list(blob) == ["local_shuffle T=16"] and list(table.dataset.unique()) == ["local_shuffle T=16"]
    assert len(blob["local_shuffle T=16"]["alibi"]["test_at_peak"]["values"]) == 2
    assert "±" in capsys.readouterr().out


def test_compare_records_its_runs_in_a_ledger(tmp_path, capsys):
    """``toyspt compare --ledger PATH`` records every run of its data kind; with probe columns
    (they read weights) a fresh cache retrains, with --no-probes the records answer."""
    from toyspt.runs.ledger import Ledger

    led = tmp_path / "runs.jsonl"
    argv = ["compare", "--recipes", "scratch", "--seeds", "0-1", "--ledger", str(led), *SMALL]
    assert main([*argv, "--cache", str(tmp_path / "c")]) == 0
    first = capsys.readouterr().out
    assert len(Ledger(led, kinds=("toy",))) == 2
    before = led.read_bytes()
    assert main([*argv, "--cache", str(tmp_path / "fresh"), "--no-probes"]) == 0  # answered by the records
    assert led.read_bytes() == before and not (tmp_path / "fresh").exists()
    table = [line for line in first.splitlines() if "scratch" in line]
    again = [line for line in capsys.readouterr().out.splitlines() if "scratch" in line]
    assert table and again and table[0].split()[:4] == again[0].split()[:4]
    assert main([*argv[:-len(SMALL)], "--ledger", "", *SMALL]) == 2


def test_bad_config_value_is_a_clear_error(tmp_path, capsys):
    assert main(["train", "--cache", str(tmp_path), "--task.T", "1"]) == 2  # one line, exit 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --task.T: ") and "\n" not in err
    assert main(["compare", "--recipes", "nonsense", "--seeds", "0", "--cache", str(tmp_path), *SMALL]) == 2
