"""A committed record can be re-run to check it bit for bit, through the path ``toyspt ledger
verify`` takes (toyspt.runs.verify): retrained in a fresh process whose environment caps torch
and oneDNN at the record's instruction sets. Bit-for-bit agreement holds on the CPU model that
made the record (MKL chooses its matrix kernels by CPU model: across vendors the records differ
by ~1e-8, docs/reproducibility.md), so the test retrains the cheapest committed ``scratch``
label run made on this host's CPU model at this host's capability (the ledger holds runs from
an AMD EPYC and an Intel Xeon host); a host of another model skips, naming it."""
from pathlib import Path

import pytest
import torch

from toyspt.runs.ledger import cpu_model
from toyspt.runs.verify import OTHER_MODEL, verify
from toyspt.ucr import design
from toyspt.ucr.data import available

ROOT = Path(__file__).resolve().parents[3]
LEDGER = ROOT / "figures/ledger/ucr.jsonl"


def _cheapest_from_here(led) -> dict | None:
    here, cap = cpu_model(), torch.backends.cpu.get_cpu_capability()
    mine = [ln.record for ln in led.lines().values()
            if ln.record["kind"] == "run" and ln.record["spec"].get("recipe") == "scratch"
            and ln.record.get("cpu") == here and ln.record.get("cpu_capability") == cap
            and isinstance(ln.record.get("seconds"), float)]
    return min(mine, key=lambda r: (r["seconds"], r["key"])) if mine else None


def test_a_recorded_run_of_this_cpu_model_is_reproduced_bit_for_bit():
    _, skipped = available(("ECG200", "GunPoint"))
    if skipped:
        pytest.skip(f"needs the ucr-all extra: {skipped}")
    led = design.LEDGER.open(LEDGER)
    rec = _cheapest_from_here(led)
    if rec is None:
        pytest.skip(f"the committed ledger holds no scratch run made on this host's CPU model ({cpu_model()}, "
                    f"{torch.backends.cpu.get_cpu_capability()})")
    out = verify(led, rec)
    assert out.status == "reproduced", "\n".join(out.lines())
    assert not any(a.startswith(OTHER_MODEL.split("{")[0]) for a in out.assumed)


def test_a_record_of_another_cpu_model_is_said_to_be():
    """Without retraining: the outcome of a record whose CPU model is not this host's names both
    (a record that names no kernels is refused before retraining, so nothing trains here)."""
    led = design.LEDGER.open(LEDGER)
    rec = next(iter(led.lines().values())).record
    other = {k: v for k, v in rec.items() if k not in ("kernels", "cpu_capability")} | {"cpu": "Elsewhere CPU"}
    out = verify(led, other)
    assert out.status == "not verified" and any("made on Elsewhere CPU" in a for a in out.assumed), out.lines()
