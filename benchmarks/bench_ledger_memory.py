"""Memory of reading a ledger near its byte cap: peak resident memory, exit code and wall seconds
of ``toyspt ledger check`` (and ``merge``) on ledgers of about ``MiB`` MiB (default 120, under the
128 MiB cap), each in a fresh process (``python benchmarks/bench_ledger_memory.py [MiB]``; a few
minutes on 2 cores). docs/ledger.md ("Bounded") quotes what it prints.

* ``study``: the committed records of figures/ledger/ucr.jsonl, repeated (identical duplicates
  are read and kept like records);
* ``norms``: sealed records each carrying the most norms a record may hold (every state's table
  at its cap of tensors): the shape that once took 2.8-3.0 GB at 117 MiB;
* ``baseline``: an empty ledger (what the command costs without a record: torch and its imports).
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


def _fill(path: Path, lines: list[bytes], mib: float) -> Path:
    """``path`` holding ``lines`` repeated in turn up to ``mib`` MiB."""
    target, size = int(mib * (1 << 20)), 0
    with open(path, "wb") as f:
        while size < target:
            for line in lines:
                f.write(line + b"\n")
                size += len(line) + 1
                if size >= target:
                    break
    return path


def _norms_records(n: int) -> list[bytes]:
    from toyspt.runs.ledger_file import seal
    from toyspt.runs.record_checks import MAX_TENSORS

    out = []
    with open(LEDGER, encoding="utf-8") as f:
        for _ in range(n):
            rec = json.loads(next(f))
            rec["norms"] = {s: {f"blocks.{i}.w": 1.0 + i / 7 for i in range(MAX_TENSORS)} for s in rec["states"]}
            out.append(json.dumps(seal(rec), separators=(",", ":")).encode())
    return out


CHILD = ("import json, resource, sys\nfrom toyspt.cli.main import main\nrc = main(json.loads(sys.argv[1]))\n"
         "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)")


def _peak(argv: list[str]) -> tuple[int, float, float]:
    """(exit code, wall seconds, peak resident MiB) of ``toyspt argv`` in a fresh process."""
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv)], cwd=ROOT, capture_output=True, text=True,
                       timeout=1800)
    peak = [ln for ln in p.stderr.splitlines() if ln.startswith("peak ")]
    return p.returncode, time.perf_counter() - t, int(peak[-1].split()[1]) / 1024.0 if peak else float("nan")


def main() -> None:
    mib = float(sys.argv[1]) if len(sys.argv) > 1 else 120.0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        study = _fill(tmp / "study.jsonl", LEDGER.read_bytes().splitlines()[:400], mib)
        norms = _fill(tmp / "norms.jsonl", _norms_records(50), mib)
        (tmp / "empty.jsonl").write_bytes(b"")
        print(f"{'case':34s} {'MiB':>6s} {'rc':>3s} {'seconds':>8s} {'peak MiB':>9s} {'peak/size':>9s}")
        cases = [("baseline: empty ledger, check", tmp / "empty.jsonl", "check"),
                 ("study records, check", study, "check"), ("norms at their cap, check", norms, "check"),
                 ("study records, merge", study, "merge")]
        for name, path, cmd in cases:
            argv = ["ledger", cmd, str(path)] + (["-o", str(tmp / "m.jsonl")] if cmd == "merge" else [])
            rc, sec, peak = _peak(argv)
            size = path.stat().st_size / (1 << 20)
            print(f"{name:34s} {size:6.1f} {rc:3d} {sec:8.1f} {peak:9.0f} {peak / max(size, 1):9.2f}", flush=True)


if __name__ == "__main__":
    main()
