"""The report and the ``python -m theory`` command line: selection, table, JSON, Markdown,
exit codes."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from toyspt.theory import report, t2_blindness
from toyspt.theory.__main__ import main
from toyspt.theory.result import Result

ROOT = Path(__file__).resolve().parents[3]


def test_select_families_and_ids():
    assert report.select("T1") == ["T1.1", "T1.2", "T1.3"]
    assert report.select("t2.3, T1.1") == ["T2.3", "T1.1"]
    assert report.select(None) == list(report.REGISTRY)
    with pytest.raises(ValueError, match="unknown claim or check 'T9'"):
        report.select("T9")
    with pytest.raises(ValueError, match="--only"):
        report.select(" , ")


def test_registry_ids_match_result_ids():
    res = report.run_checks("T2.3,T2.4", quick=True)
    assert [r.check for r in res] == ["T2.3", "T2.4"]
    assert all(r.verdict == "pass" for r in res)
    table = report.format_table(res, why=True)
    for word in ("check", "claim", "what was checked", "symbolic", "figure", "tol.", "verdict",
                 "T2.3", "T2.4", "holds", "pass", "[tol.: float64"):
        assert word in table
    assert report.exit_code(res) == 0


def test_cli_json_and_exit_code_zero(tmp_path, capsys):
    out = tmp_path / "sub" / "report.json"
    assert main(["--quick", "--only", "T2.3,T4.4", "--no-cache", "-q", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["check"] for r in doc["results"]] == ["T2.3", "T4.4"]
    assert doc["summary"]["pass"] == 2 and doc["meta"]["quick"] is True
    assert "tolerance_why" in doc["results"][0]
    assert [p.name for p in out.parent.iterdir()] == ["report.json"]  # atomic: no temp file left
    assert "all checked claims hold" in capsys.readouterr().out


def _failing(quick=False):
    # a deliberately wrong claim: a Toeplitz (non-circulant) direction asserted to be blind
    r = t2_blindness.check_blind_direction(quick=quick, kind="toep_w1")
    return Result(**{**r.__dict__, "check": "T2.4"})


def _raising(quick=False):
    raise RuntimeError("check crashed")


def test_cli_exit_code_one_on_failure_and_error(monkeypatch, capsys):
    monkeypatch.setitem(report.REGISTRY, "T2.4", _failing)
    assert main(["--quick", "--only", "T2.4", "-q"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "SOME CHECKED CLAIMS FAIL" in out
    monkeypatch.setitem(report.REGISTRY, "T2.4", _raising)
    res = report.run_checks("T2.4", quick=True)
    assert res[0].verdict == "error" and "check crashed" in res[0].checked
    assert report.exit_code(res) == 1


def test_cli_bad_arguments_exit_two(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--only", "T7"])
    assert e.value.code == 2
    assert "unknown claim or check" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
def test_an_output_that_is_a_folder_or_a_fifo_is_refused_before_any_check(tmp_path, capsys, monkeypatch, flag):
    import os

    monkeypatch.setitem(report.REGISTRY, "T2.4", _raising)  # would run if the flags were accepted
    os.mkfifo(tmp_path / "pipe")
    for target, words in ((tmp_path, "but it is a folder"), (tmp_path / "pipe", "but it is not a regular file"),
                          (Path(__file__) / "x.json", "is a file, not a folder")):
        with pytest.raises(SystemExit) as e:
            main(["--only", "T2.4", "-q", flag, str(target)])
        assert e.value.code == 2 and words in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_a_write_that_fails_after_the_checks_is_one_line_exit_two(tmp_path, capsys, monkeypatch):
    from toyspt.util.atomic import WriteError

    def full(*a, **k):
        raise WriteError(f"{tmp_path / 'r.json'}: cannot write it: No space left on device; "
                         "nothing half-written was left")

    monkeypatch.setattr(report, "write_json", full)
    assert main(["--quick", "--only", "T2.3", "--no-cache", "-q", "--json", str(tmp_path / "r.json")]) == 2
    assert capsys.readouterr().err.endswith("No space left on device; nothing half-written was left\n")


def test_cli_list(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "T3.5" in out and "T5.4" in out


def test_module_entry_point():
    p = subprocess.run([sys.executable, "-m", "theory", "--quick", "--only", "T2.3", "--no-cache", "-q"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "T2.3" in p.stdout and "1 checks: 1 pass" in p.stdout


def test_write_json_replaces_existing(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    res = report.run_checks("T2.3", quick=True)
    report.write_json(res, path, note="x")
    doc = json.loads(path.read_text())
    assert doc["meta"]["note"] == "x" and doc["results"][0]["check"] == "T2.3"


def test_markdown_report_names_its_command_and_has_one_row_per_check(tmp_path, monkeypatch, capsys):
    out = tmp_path / "report.md"
    argv = ["--quick", "--only", "T2.3,T2.4", "--no-cache", "-q", "--markdown", str(out)]
    monkeypatch.setitem(report.REGISTRY, "T2.4", _failing)
    assert main(argv) == 1
    text = out.read_text()
    assert f"Generated by `python -m theory {' '.join(argv)}`" in text
    rows = [line for line in text.splitlines() if re.match(r"\| T\d\.\d ", line)]
    assert [r.split()[1] for r in rows] == ["T2.3", "T2.4"]
    for r in rows:  # seven columns: the claims' own | are escaped
        assert len(re.findall(r"(?<!\\)\|", r)) == 8, r
    assert rows[1].endswith("| **FAIL** |") and "SOME CHECKED CLAIMS FAIL" in text
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    assert f"wrote {out}" in capsys.readouterr().out
