"""Any record of the committed ledger can be re-run to check it bit for bit, on a machine whose
torch CPU capability is the record's (AVX512 and AVX2 hosts round differently from the first
step: docs/reproducibility.md). The cheapest recorded label run is retrained from nothing and
its entry compared with the record's, every number."""
import json
from pathlib import Path

import pytest
import torch

from toyspt.ucr import design
from toyspt.ucr.data import available
from toyspt.util.hashing import jsonable

ROOT = Path(__file__).resolve().parents[3]
LEDGER = ROOT / "figures/ledger/ucr.jsonl"


def test_a_recorded_run_is_reproduced_bit_for_bit_on_its_capability():
    datasets, skipped = available(("ECG200",))
    if skipped:
        pytest.skip(f"needs the ucr-all extra: {skipped}")
    spec = next(s for _, a, s in design.paper_specs(datasets, design.tier("default"), ("scratch",)) if s.seed == 0)
    led = design.LEDGER.open(LEDGER)
    line = led.lines().get(spec.key())
    assert line is not None, f"the committed ledger has no record of {spec.label()}"
    here = torch.backends.cpu.get_cpu_capability()
    if line.record.get("cpu_capability") != here:
        pytest.skip(f"the record was computed with {line.record.get('cpu_capability')!r} kernels, this machine "
                    f"dispatches to {here!r}: bits can only be compared on the record's capability")
    recorded = jsonable(led.load(spec).to_json())
    again = jsonable(spec.execute().to_json())
    for part in ("history", "summary", "records", "config"):
        assert json.dumps(again[part]) == json.dumps(recorded[part]), part
