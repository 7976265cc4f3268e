"""Ledger files for the fault tests: the first records of the committed UCR ledger, and a ledger
written from records (one JSON line each)."""
from __future__ import annotations

import json
from pathlib import Path

LEDGER = Path(__file__).resolve().parents[2] / "figures" / "ledger" / "ucr.jsonl"


def committed_records(n: int) -> list[dict]:
    """The first ``n`` records of the committed UCR ledger."""
    with open(LEDGER, encoding="utf-8") as f:
        return [json.loads(next(f)) for _ in range(n)]


def write_ledger(path: Path, records: list[dict]) -> Path:
    """``records`` as a ledger file at ``path``, one compact JSON line each."""
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path
