"""The ``toyspt`` front door: ``--version`` and ``--help`` import no heavy library; every
subcommand's ``--help`` still works; ``toyspt theory`` passes its arguments on."""
import argparse
import subprocess
import sys

import pytest

from toyspt.cli.main import COMMANDS, build_parser, main

HEAVY = ("torch", "pandas", "matplotlib", "numpy", "scipy")


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_heavy_library(flag):
    code = ("import sys\n"
            "from toyspt.cli.main import main\n"
            f"rc = main([{flag!r}])\n"
            f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "print('RC', rc, 'HEAVY', heavy)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "RC 0 HEAVY []" in p.stdout, p.stdout
    assert ("toyspt " if flag == "--version" else "usage: toyspt") in p.stdout


def _registered_help(command: str) -> str:
    sub = next(a for a in build_parser(command)._actions if isinstance(a, argparse._SubParsersAction))
    return next(c.help for c in sub._choices_actions if c.dest == command)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_line_is_the_registered_one(command):
    assert _registered_help(command) == COMMANDS[command][1]


@pytest.mark.parametrize("argv", [[c, "--help"] for c in COMMANDS]
                         + [["lra", c, "--help"] for c in ("inspect", "probe", "fields", "demo")])
def test_every_subcommand_help_works(argv, capsys):
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(f"usage: toyspt {' '.join(argv[:-1])}")


def test_usage_errors_exit_two(capsys):
    assert main([]) == 2
    assert main(["bogus"]) == 2
    assert main(["theory", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["theory", "--quick", "--only", "T1.1", "--no-cache", "-q"],
                                  ["theory", "--", "--quick", "--only", "T1.1", "--no-cache", "-q"]])
def test_theory_takes_its_flags_with_or_without_a_separator(argv, capsys):
    assert main(argv) == 0
    assert "1 checks: 1 pass, 0 fail" in capsys.readouterr().out
