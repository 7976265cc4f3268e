"""The study figures redrawn from the committed ledgers alone (an empty run cache, nothing
trained) are the committed ones: every real_gain*, archive_scan*, real_gain_splits*,
archive_small* CSV (figures/ledger/ucr.jsonl) and the LRA studies' claims and mechanism CSVs
(figures/ledger/lra.jsonl) byte for byte, and their metadata entries but for when and where
they were drawn (floats up to the rounding a host's SIMD width may change). A bug that moves a
published number fails here at once. Measured 47.5 s (the real-data study's) under pytest on
the shared 2-core machine, two training processes beside it, so it runs in CI."""
import json
import subprocess
import sys
from pathlib import Path

from toyspt.runs.ledger import differences

ROOT = Path(__file__).resolve().parents[2]
FIGS = ("real_gain", "archive_scan", "real_gain_splits", "archive_small")
LRA = ("lra_claims", "lra_mechanism", "lra_claims2", "lra_mechanism2")
VOLATILE = ("draw_seconds", "written_after_seconds", "written_on", "call")  # when, where and by which call


# numpy sums in SIMD lanes whose width is the CPU's (AVX2: 4 doubles, AVX-512: 8), so a sum of n
# terms may round differently from host to host, by up to about n * eps of the sum of the terms'
# magnitudes; a figure's metadata sums at most a few thousand runs' numbers, whose magnitudes sum
# to at most ~100 times the result's scale, so floats agree within 4096 * 100 * eps on any host.
# (Seen: archive_scan's pooled interval moved by 4e-18 between an AVX-512 and an AVX2 host.)
FLOAT_TOL = 4096 * 100 * sys.float_info.epsilon


def _entry(meta_path: Path, name: str) -> dict:
    entry = json.loads(meta_path.read_text())["figures"][name]
    return {k: v for k, v in entry.items() if k not in VOLATILE}


def test_the_study_figures_redraw_from_the_ledger_as_committed(tmp_path):
    out = tmp_path / "figures"
    p = subprocess.run([sys.executable, "paper_figs.py", "--tier", "study", "--only", ",".join(FIGS), "--out", str(out),
                        "--cache", str(tmp_path / "empty"), "--workers", "1", "--ledger", "figures/ledger/ucr.jsonl"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert json.loads((out / "metadata.json").read_text())["last_run"]["runs_trained"] == 0  # all from the ledger
    written = sorted(f.name for f in out.glob("*.csv"))
    assert written == sorted({f.name for n in FIGS for f in (ROOT / "figures").glob(f"{n}*.csv")})
    differ = [n for n in written if (out / n).read_bytes() != (ROOT / "figures" / n).read_bytes()]
    assert not differ, f"redrawn from the ledger, these CSVs differ from figures/: {differ}"
    for name in FIGS:
        assert not differences(_entry(ROOT / "figures" / "metadata.json", name), _entry(out / "metadata.json", name),
                               tol=FLOAT_TOL), name


def test_the_lra_figures_redraw_from_the_lra_ledger_as_committed(tmp_path):
    """Both LRA studies' claims and mechanism (--tier lra --only lra_claims,lra_mechanism,
    lra_claims2,lra_mechanism2) from the committed ledger alone: their eight CSVs byte for byte,
    their metadata entries but for when and where, nothing trained."""
    out = tmp_path / "figures"
    p = subprocess.run([sys.executable, "paper_figs.py", "--tier", "lra", "--only", ",".join(LRA), "--out", str(out),
                        "--cache", str(tmp_path / "empty"), "--workers", "1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert json.loads((out / "metadata.json").read_text())["last_run"]["runs_trained"] == 0
    for name in ("lra_claims.csv", "lra_claims_runs.csv", "lra_mechanism.csv", "lra_claims_probes.csv",
                 "lra_claims2.csv", "lra_claims2_runs.csv", "lra_mechanism2.csv", "lra_claims_probes2.csv"):
        assert (out / name).read_bytes() == (ROOT / "figures" / name).read_bytes(), name
    for name in LRA:
        assert not differences(_entry(ROOT / "figures" / "metadata.json", name), _entry(out / "metadata.json", name),
                               tol=FLOAT_TOL), name
