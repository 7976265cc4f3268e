"""Which attention basin SPT falls into, and what decides it (toyspt.probe.basin).

    python benchmarks/basin_study.py --part beta
    python benchmarks/basin_study.py --part spt  --seeds 0-3 --workers 2
    python benchmarks/basin_study.py --part full --seeds 0-2 --workers 2 --cells zero_mean,off0.25,off0.5,f0.5-1.5
    python benchmarks/basin_study.py --part trap --seeds 0-2 --workers 2 --trap-epochs 3 --trap-offset 0.5

Parts (default model and TrainConfig; one thread per worker process):

* ``beta``: the data's beta_unif (exact over the mask law, train split) for offsets
  {0, .05, .1, .15, .25, .5} x freq_range {(1,3), (.5,1.5), (.25,1)}.
* ``spt``: SPT only (run_recipe's ``spt_only``, with trackers) per cell and seed: the model's gain beta
  (toyspt.probe.basin.model_beta, 256
  validation sequences, fixed mask) and the proximity index (toyspt.probe.tracking, 256
  validation sequences, unmasked) after epochs 0 (init), 1, 2, 3 and 30; the attention
  peak offset at the end; T3's sign rule at init (dL_rec[N] along the neighbour direction,
  L1, 64 training sequences, and the Jacobian gain beta_eff of theory/toy.py, also after
  epochs 1-3 and 30); whether each predicts the basin (proximity index > 1 after SPT).
* ``full``: run_recipe scratch and spt: test accuracy at peak validation, proximity index
  after SPT.
* ``trap``: SPT for ``--trap-epochs`` epochs on offset data, then the remaining epochs of the
  30 on the zero-mean data (offset 0) (a fresh AdamW at the switch), then the label phase on the default
  data, against plain zero-mean SPT of the same seed (both from the same init and seeded
  stream): final SPT validation loss on zero-mean data (offset 0) (same mask), proximity index, test
  accuracy at peak validation.

Writes ``<out>/<part>.csv`` and prints the tables. Measured on the 2-core machine, shared
with other jobs (load 3-5): ``beta`` 1 s; ``spt`` (8 cells x 4 seeds) 846 s; ``full`` (4 cells
x 3 seeds x 2 recipes) 817 s; ``trap`` (3 seeds) 319 s. One uncontended default SPT phase
(30 epochs, 3000 sequences) takes about 22 s on one thread.
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import torch

from toyspt.data.tasks import TaskConfig, make_task
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import tracking
from toyspt.probe.basin import BETA_BATCH, BetaTracker, beta_unif, model_beta, peak_offset
from toyspt.train.config import RunConfig
from toyspt.train.loop import Lockstep, RunContext, clone_state
from toyspt.train.recipes import TrainConfig, get_recipe
from toyspt.train.run import finetune, load_model, pretrain, run_recipe, seed_stream, summarize, transfer

OFFSETS = (0.0, 0.05, 0.1, 0.15, 0.25, 0.5)
FREQS = ((1.0, 3.0), (0.5, 1.5), (0.25, 1.0))
CELLS = {  # name -> TaskConfig overrides
    "zero_mean": dict(offset=0.0), "off0.05": dict(offset=0.05), "off0.1": dict(offset=0.1),
    "off0.15": dict(offset=0.15), "off0.25": dict(offset=0.25), "off0.5": dict(offset=0.5),
    "f0.5-1.5": dict(freq_range=(0.5, 1.5)), "f0.25-1": dict(freq_range=(0.25, 1.0)),
}
EARLY = (0, 1, 2, 3)


def _seeds(s: str) -> list[int]:
    out = []
    for part in s.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def _pi(model, x) -> tuple[float, int]:
    A = next(iter(tracking.attention_maps(model, x).values()))
    return tracking.proximity_index(A).mean().item(), int(peak_offset(A)[0])


def _sign_rule_at_init(model, data, mask_rate) -> tuple[float, float]:
    """T3's first-order quantities (theory/): dL_rec[N] (L1) and beta_eff, float64."""
    from toyspt.theory import toy
    from toyspt.theory.t3_recon import neighbour_direction

    from toyspt.probe import engine as probes
    from toyspt.probe import losses

    batch = losses.make_batch(data.train.x[:64].double(), data.train.y[:64], mask_rate, 0)
    m = build_model(model.cfg, 0).double().eval()
    m.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    d = probes.probe(m, batch, losses.recon("l1"), {"N": neighbour_direction(data.config.T)},
                     per_example=False, use_jvp=False)[toy.HOOK_S].deriv[0, 0].item()
    return d, toy.effective_gain(m, batch)


class _Early:
    """Per epoch: proximity index; at epochs in EARLY and the last: beta_eff (Jacobian)."""

    def __init__(self, data, mask_rate, last):
        self.x, self.data, self.q, self.last, self.rows = data.val.x[:BETA_BATCH], data, mask_rate, last, {}

    def _row(self, ctx):
        pi, peak = _pi(ctx.model, self.x)
        row = dict(pi=pi, peak=peak)
        if ctx.epoch in EARLY or ctx.epoch == self.last:
            row["drec_N"], row["beta_eff"] = _sign_rule_at_init(ctx.model, self.data, self.q)
        self.rows[ctx.epoch] = row

    def on_phase_start(self, ctx):
        self._row(ctx)

    def on_epoch(self, ctx, rec):
        self._row(ctx)


def spt_only(cell: str, seed: int) -> dict:
    torch.set_num_threads(1)
    t0 = time.time()
    data, cfg = make_task(TaskConfig(**CELLS[cell])), TrainConfig()
    bt, early = BetaTracker(data, mask_rate=cfg.mask_rate), _Early(data, cfg.mask_rate, cfg.pre_epochs)
    res = run_recipe(RunConfig("spt_only", train=cfg), data, seed, callbacks=[bt, early])
    hist = res.history
    beta = {r["epoch"]: r["value"] for r in res.records if r["metric"] == "beta"}
    E = cfg.pre_epochs
    row = dict(cell=cell, seed=seed, beta_unif=bt.beta_unif, val_loss=hist[-1]["val_loss"],
               pi_end=early.rows[E]["pi"], peak_end=early.rows[E]["peak"], secs=time.time() - t0)
    for e in (*EARLY, E):
        tag = "end" if e == E else e
        row[f"beta_{tag}"] = beta[e]
        row[f"beta_eff_{tag}"] = early.rows[e]["beta_eff"]
        if e in (1, 2, 3):
            row[f"pi_{tag}"] = early.rows[e]["pi"]
    row["drec_N_0"] = early.rows[0]["drec_N"]
    return row


def full(cell: str, seed: int, recipe: str) -> dict:
    torch.set_num_threads(1)
    t0 = time.time()
    data = make_task(TaskConfig(**{"offset": 0.0, **CELLS[cell]}))
    res = run_recipe(recipe, data, seed)
    row = dict(cell=cell, seed=seed, recipe=recipe, test_at_peak=res.summary["test_at_peak"],
               final_train_acc=res.summary["final_train_acc"], secs=time.time() - t0)
    if "pretrained" in res.states:
        row["pi_pre"] = _pi(load_model(res, "pretrained"), data.val.x[:BETA_BATCH])[0]
    return row


def trap(seed: int, k: int, offset: float) -> list[dict]:
    """Default SPT and offset-then-default SPT from the same init and seeded stream."""
    torch.set_num_threads(1)
    cfg = TrainConfig()
    default, shifted = make_task(TaskConfig(offset=0.0)), make_task(TaskConfig(offset=offset))  # zero-mean task
    out = []
    for arm, phases in (("spt_default", [(default, cfg.pre_epochs)]),
                        (f"trap_off{offset}x{k}", [(shifted, k), (default, cfg.pre_epochs - k)])):
        t0 = time.time()
        model = build_model(ModelConfig(), seed)
        ctx = RunContext(model, "spt", seed, init_state=clone_state(model))
        gen = torch.Generator().manual_seed(seed_stream(seed))
        bt = BetaTracker(default, mask_rate=cfg.mask_rate)
        lock = Lockstep([ctx], [[bt]])
        for d, n in phases:  # each call a phase of its own: a fresh AdamW at the switch
            hist = pretrain(lock, d, TrainConfig(pre_epochs=n), [gen], ["task"] * n)[0]
        pretrained = clone_state(model)
        pi, peak = _pi(model, default.val.x[:BETA_BATCH])
        beta_end = model_beta(model, bt.x, bt.mask)
        model.load_state_dict(ctx.init_state)
        transfer(model, pretrained, get_recipe("spt").transferred(model))
        h = [[]]
        finetune(lock, default, RunConfig("spt", train=cfg), [gen], h)  # spt: cfg.epochs label epochs
        s = summarize(h[0])
        out.append(dict(seed=seed, arm=arm, spt_val_loss=hist[-1]["val_loss"], pi_pre=pi, peak=peak,
                        beta_end=beta_end, test_at_peak=s["test_at_peak"],
                        final_train_acc=s["final_train_acc"], secs=time.time() - t0))
    return out


def _pool(workers):
    return ProcessPoolExecutor(max_workers=workers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("beta", "spt", "full", "trap"), required=True)
    ap.add_argument("--seeds", type=_seeds, default=_seeds("0-3"))
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--trap-epochs", type=int, default=3)
    ap.add_argument("--trap-offset", type=float, default=0.5)
    ap.add_argument("--out", default="out/basin_study")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cells = [c for c in args.cells.split(",") if c]
    unknown = set(cells) - set(CELLS)
    if unknown:
        ap.error(f"--cells: unknown {sorted(unknown)}; choose from {list(CELLS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 60)
    pd.set_option("display.float_format", "{:.3f}".format)
    if args.part == "beta":
        rows = [dict(offset=o, freq_range=str(f), beta_unif=beta_unif(make_task(TaskConfig(offset=o, freq_range=f))))
                for f in FREQS for o in OFFSETS]
        f = pd.DataFrame(rows)
        print(f.pivot(index="offset", columns="freq_range", values="beta_unif")
              [[str(x) for x in FREQS]].to_string(float_format="{:+.4f}".format))
    elif args.part == "spt":
        jobs = [(c, s) for c in cells for s in args.seeds]
        with _pool(args.workers) as ex:
            rows = list(ex.map(spt_only, *zip(*jobs)))
        f = pd.DataFrame(rows)
        f["basin"] = (f.pi_end > 1).map({True: "proximity", False: "anti-local"})
        cols = ["cell", "seed", "beta_unif", "beta_0", "beta_1", "beta_2", "beta_3", "beta_end",
                "beta_eff_0", "beta_eff_1", "beta_eff_3", "beta_eff_end", "drec_N_0",
                "pi_1", "pi_3", "pi_end", "peak_end", "val_loss", "basin", "secs"]
        print(f[cols].to_string(index=False))
        prox = f.pi_end > 1
        print("\nbasin predicted (sign > 0 <=> proximity), runs agreeing / total:")
        for name, pred in [("T3 rule at init: dL_rec[N] < 0", f.drec_N_0 < 0),
                           ("beta_eff (Jacobian) at init > 0", f.beta_eff_0 > 0),
                           ("model_beta at init > 0", f.beta_0 > 0)] + \
                [(f"model_beta after epoch {e} > 0", f[f"beta_{e}"] > 0) for e in (1, 2, 3)] + \
                [(f"beta_eff after epoch {e} > 0", f[f"beta_eff_{e}"] > 0) for e in (1, 3)] + \
                [("beta_unif of the data > 0", f.beta_unif > 0)]:
            print(f"  {name:40s} {(pred == prox).sum()}/{len(f)}")
        g = f.groupby("cell", sort=False)
        print("\nper cell: median [min, max]")
        print(g.agg(beta_unif=("beta_unif", "first"),
                    n_prox=("basin", lambda s: f"{(s == 'proximity').sum()}/{len(s)}"),
                    pi_end=("pi_end", lambda s: f"{s.median():.3g} [{s.min():.3g}, {s.max():.3g}]"),
                    beta_end=("beta_end", lambda s: f"{s.median():.3g} [{s.min():.3g}, {s.max():.3g}]"),
                    peak=("peak_end", lambda s: ",".join(map(str, s))),
                    val_loss=("val_loss", "median")).to_string())
    elif args.part == "full":
        jobs = [(c, s, r) for c in cells for s in args.seeds for r in ("scratch", "spt")]
        with _pool(args.workers) as ex:
            rows = list(ex.map(full, *zip(*jobs)))
        f = pd.DataFrame(rows)
        print(f.to_string(index=False))
        w = f.pivot_table(index=["cell", "seed"], columns="recipe", values="test_at_peak")
        w["gain"] = w["spt"] - w["scratch"]
        print()
        print(w.to_string())
        print("\nper cell mean:")
        print(w.groupby("cell", sort=False).mean().to_string())
    else:
        with _pool(args.workers) as ex:
            rows = [r for rs in ex.map(trap, args.seeds, [args.trap_epochs] * len(args.seeds),
                                       [args.trap_offset] * len(args.seeds)) for r in rs]
        f = pd.DataFrame(rows)
        print(f.to_string(index=False))
        print()
        print(f.drop(columns="seed").groupby("arm", sort=False).mean().to_string())
    f.to_csv(out / f"{args.part}.csv", index=False)
    print(f"\n{time.time() - t0:.0f} s wall, {os.cpu_count()} cpus; wrote {out / (args.part + '.csv')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
