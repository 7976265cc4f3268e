"""Any record of the committed ledger can be re-run to check it bit for bit, through the path
``toyspt ledger verify`` takes (toyspt.runs.verify): retrained in a fresh process whose
environment caps torch and oneDNN at the record's instruction sets, so a host whose CPU offers
at least those sets (an AVX-512 host for the study's AVX2 records) reproduces it; only a host
that cannot dispatch them skips, saying why. The cheapest recorded label run (ECG200, scratch,
seed 0) is retrained from nothing and its entry compared with the record's, every number."""
from pathlib import Path

import pytest

from toyspt.runs import kernels
from toyspt.runs.ledger import cpu_model
from toyspt.runs.verify import verify
from toyspt.ucr import design
from toyspt.ucr.data import available

ROOT = Path(__file__).resolve().parents[3]
LEDGER = ROOT / "figures/ledger/ucr.jsonl"


def test_a_recorded_run_is_reproduced_bit_for_bit_under_its_kernels():
    datasets, skipped = available(("ECG200",))
    if skipped:
        pytest.skip(f"needs the ucr-all extra: {skipped}")
    spec = next(s for _, a, s in design.paper_specs(datasets, design.tier("default"), ("scratch",)) if s.seed == 0)
    led = design.LEDGER.open(LEDGER)
    line = led.lines().get(spec.key())
    assert line is not None, f"the committed ledger has no record of {spec.label()}"
    want, _ = kernels.recorded(line.record, here=cpu_model())
    env, why = kernels.environment(want)
    if env is None:
        pytest.skip(f"this host cannot dispatch the record's kernels: {why}")
    out = verify(led, line.record)
    assert out.status == "reproduced", "\n".join(out.lines())
