"""Time and peak memory of the LRA probe report on a full-size ListOps Transformer
(6 layer pairs x 512, 8 heads, FFN 2048) with random weights, one example of T tokens:
label + recon score-gradient probes (7 directions) and the profiles.

Two engines (``ReportConfig.engine``): ``probes`` runs :func:`toyspt.probe.engine.probe` per
example (full G of every layer, W_Q/W_K gradients, dL/dM), ``lean`` the per-layer,
per-head reduction of ``probe(..., lean=True)`` (frozen weights, nothing of size T^2
kept beyond the forward's own). Each (engine, T, dtype) runs in a fresh subprocess so its
peak resident memory (ru_maxrss) is its own. Single thread by default.

    python benchmarks/lra_probe.py --engine lean --T 4000 --dtype float32 float64
    python benchmarks/lra_probe.py --engine probes lean --T 1000 2000 --dtype float32
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(T: int, dtype: str, threads: int, engine: str) -> dict:
    import torch

    torch.set_num_threads(threads)
    from toyspt.lra.inputs import make_batch
    from toyspt.lra.model import LRAConfig, build_lra
    from toyspt.lra.report import ReportConfig, probe_rows, profile_rows

    cfg = LRAConfig(n_layers=6, d_model=512, n_heads=8, d_ff=2048, rec_out=19, max_len=16384)
    t0 = time.perf_counter()
    model = build_lra(cfg, seed=0).to(getattr(torch, dtype)).eval()
    ids = torch.randint(4, 19, (1, T), generator=torch.Generator().manual_seed(0))
    batch = make_batch(ids, torch.tensor([3]), p_mask=0.5, seed=0)
    rcfg = ReportConfig(dtype=dtype, engine=engine)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.no_grad():
        model.classify(ids)
    t_fwd = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows = probe_rows(model, batch, rcfg)
    t_probe = time.perf_counter() - t0
    t0 = time.perf_counter()
    prof = profile_rows(model, batch, rcfg)
    t_prof = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB (Linux)
    return dict(engine=engine, T=T, dtype=dtype, threads=threads, build_s=round(t_build, 2), forward_s=round(t_fwd, 2),
                probe_label_recon_s=round(t_probe, 1), profiles_s=round(t_prof, 1),
                peak_rss_gib=round(peak, 2), probe_rows=len(rows), profile_rows=len(prof))


def precision(T: int, threads: int) -> dict:
    """How far the float32 report is from the float64 one on the same weights and example:
    largest |difference| of the aggregated per-(layer, head, direction) numbers."""
    import torch

    torch.set_num_threads(threads)
    from toyspt.lra.inputs import make_batch
    from toyspt.lra.model import LRAConfig, build_lra
    from toyspt.lra.report import ReportConfig, aggregate_probes, probe_rows

    cfg = LRAConfig(n_layers=6, d_model=512, n_heads=8, d_ff=2048, rec_out=19, max_len=16384)
    model = build_lra(cfg, seed=0).double().eval()
    ids = torch.randint(4, 19, (1, T), generator=torch.Generator().manual_seed(0))
    batch = make_batch(ids, torch.tensor([3]), p_mask=0.5, seed=0)
    aggs = {}
    for dt in ("float64", "float32"):
        m = model.to(getattr(torch, dt))
        aggs[dt] = aggregate_probes(probe_rows(m, batch, ReportConfig(dtype=dt))).set_index(
            ["layer", "head", "direction", "metric"]).value
    diff = (aggs["float32"] - aggs["float64"]).abs()
    out = {}
    for metric in ("cos_rms_label", "cos_rms_recon", "ratio", "row_heterogeneity_label",
                   "row_heterogeneity_recon"):
        d = diff.xs(metric, level="metric")
        v = aggs["float64"].xs(metric, level="metric").abs()
        out[metric] = dict(max_abs_diff=float(d.max()), max_rel_diff=float((d / v.clip(lower=1e-12)).max()))
    return dict(T=T, **{f"{k}_{kk}": vv for k, v in out.items() for kk, vv in v.items()})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, nargs="+", default=[1000, 2000])
    ap.add_argument("--dtype", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--engine", nargs="+", default=["lean"], choices=["lean", "probes"])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--precision", action="store_true",
                    help="instead: float32 against float64 report numbers at each --T (lean engine)")
    a = ap.parse_args(argv)
    if a.precision:
        for T in a.T:
            print(json.dumps(precision(T, a.threads)), flush=True)
        return
    if a.child:
        print(json.dumps(one(a.T[0], a.dtype[0], a.threads, a.engine[0])))
        return
    results = []
    for engine in a.engine:
        for T in a.T:
            for dt in a.dtype:
                out = subprocess.run([sys.executable, __file__, "--child", "--T", str(T), "--dtype", dt,
                                      "--threads", str(a.threads), "--engine", engine],
                                     capture_output=True, text=True)
                if out.returncode:
                    print(out.stderr, file=sys.stderr)
                    raise SystemExit(f"{engine} T={T} {dt}: failed")
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"done {engine} T={T} {dt}: {results[-1]}", file=sys.stderr, flush=True)
    import pandas as pd
    print("LRA probe report, 6x512 ListOps model, 8 heads, random weights, 1 example, "
          "label + recon probes (7 directions) + profiles")
    print(pd.DataFrame(results).to_string(index=False))


if __name__ == "__main__":
    main()
