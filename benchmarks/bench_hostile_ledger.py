"""Hostile ledgers and pages: exit code, wall seconds and peak memory of the commands that read
them (``python benchmarks/bench_hostile_ledger.py``; about a minute). Each case runs in a fresh
process (peak resident memory from ``getrusage`` of the children); the inputs are built from the
first committed records of figures/ledger/ucr.jsonl in a temporary folder. The cases (a compact form
claiming 10^12 values, a 64 MiB one-line JSON array, a forged number in a sealed record, a record
whose kind is a list, a 0.8 MB page of unclosed doc markers) are tests too:
tests/integration/test_faults_ledger.py and test_faults_docs.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "figures/ledger/ucr.jsonl"


def _records(n: int) -> list[dict]:
    with open(LEDGER, encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(n)]


def _write(path: Path, recs: list) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))
    return path


CHILD = ("import json, resource, sys\nfrom toyspt.cli.main import main\nrc = main(json.loads(sys.argv[1]))\n"
         "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)")


def _run(argv: list[str]) -> tuple[int, float, float, str]:
    """(exit code, wall seconds, peak resident MB, last line printed) of the command ``argv`` in a fresh process."""
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    sec = time.perf_counter() - t
    peak = [ln for ln in p.stderr.splitlines() if ln.startswith("peak ")]
    err = [ln for ln in p.stderr.strip().splitlines() if not ln.startswith("peak ")]
    said = (p.stdout.strip().splitlines() or err or [""])[-1]
    return p.returncode, sec, int(peak[-1].split()[1]) / 1024.0 if peak else float("nan"), said[:90]


def cases(tmp: Path) -> dict[str, list[str]]:
    from toyspt.runs.exact import decode, exact_encode
    from toyspt.runs.ledger_file import seal

    rec = _records(1)[0]
    bomb = json.loads(json.dumps(rec))
    bomb["entry"]["history"]["@rows"]["cols"]["epoch"] = {"@range": [1, 1, 10 ** 12]}
    forged = json.loads(json.dumps(rec))
    entry = decode(forged["entry"])
    entry["summary"] = {k: (v + 0.05 if k == "final_test_acc" else v) for k, v in entry["summary"].items()}
    forged["entry"] = exact_encode(entry)
    reforged = seal(forged)  # a consistent record: only the record checks (summary vs history) can name it
    kind_list = dict(rec, kind=["run"])
    big = tmp / "array.jsonl"
    with open(big, "w") as f:
        f.write("[" + ",".join(["1"] * (32 << 20)) + "]\n")  # 64 MiB on one line
    page = tmp / "docs"
    page.mkdir()
    (page / "page.md").write_text("<!-- table ucr_paired -->\n" * 30_000)  # 0.8 MB
    return {
        "10^12-value @range line: ledger check": ["ledger", "check", str(_write(tmp / "bomb.jsonl", [bomb]))],
        "64 MiB one-line JSON array: ledger check": ["ledger", "check", str(big)],
        "+0.05 on a summary, digest left: ledger check": ["ledger", "check", str(_write(tmp / "f.jsonl", [forged]))],
        "+0.05 on a summary, sealed again: ledger check": ["ledger", "check",
                                                           str(_write(tmp / "g.jsonl", [reforged]))],
        "kind is a list: ledger check": ["ledger", "check", str(_write(tmp / "k.jsonl", [kind_list]))],
        "0.8 MB of unclosed markers: toyspt docs --check": ["docs", "--check", str(page / "page.md")],
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        print(f"{'case':52s} {'rc':>3s} {'seconds':>8s} {'peak MB':>8s}  said")
        for name, argv in cases(Path(d)).items():
            rc, sec, mb, said = _run(argv)
            print(f"{name:52s} {rc:3d} {sec:8.2f} {mb:8.0f}  {said}", flush=True)


if __name__ == "__main__":
    main()
