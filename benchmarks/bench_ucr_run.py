"""Time of one UCR run at the defaults (300 SPT + 200 label epochs, batch 8) per data set,
evaluating every split every epoch (``evaluate="all"``, what every run did before the
evaluation policies) against ``evaluate="peak"`` (test accuracy only where validation
peaks, and at the end), side by side in one process; checks that both give the same
summary and weights.

    python benchmarks/bench_ucr_run.py                        # the four paper sets, spt, seed 0
    python benchmarks/bench_ucr_run.py --datasets GunPoint --recipe scratch
    python benchmarks/bench_ucr_run.py --datasets toy --recipe scratch   # the toy task's default run

``toy`` names the default toy task (``RunSpec`` defaults) instead of a UCR set.
"""
from __future__ import annotations

import argparse
import time

import torch

from toyspt.data.tasks import make_task
from toyspt.runs import RunSpec
from toyspt.ucr.data import PAPER_DATASETS, load_ucr
from toyspt.ucr.runs import ucr_run, ucr_spec


def data_and_spec(name: str, recipe: str, seed: int):
    """(data, spec maker of an evaluation policy) of a UCR set, or of the toy task for ``toy``."""
    if name == "toy":
        base = RunSpec(recipe, seed)
        return make_task(base.task), lambda policy: RunSpec(recipe, seed, evaluate=policy)
    data = load_ucr(name)
    return data, lambda policy: ucr_spec(ucr_run(recipe, evaluate=policy), data, seed)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(PAPER_DATASETS))
    p.add_argument("--recipe", default="spt")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'data set':16s} {'train/val/test':>15s} {'all s':>7s} {'peak s':>7s} {'x':>6s}  test evals  same")
    for name in [n for n in args.datasets.split(",") if n]:
        data, make_spec = data_and_spec(name, args.recipe, args.seed)
        t, res = {}, {}
        for policy in ("all", "peak"):
            spec = make_spec(policy)
            t0 = time.perf_counter()
            res[policy] = spec.execute()
            t[policy] = time.perf_counter() - t0
        a, b = res["all"], res["peak"]
        same = a.summary == b.summary and all(torch.equal(v, b.states["final"][k])
                                              for k, v in a.states["final"].items())
        n_test = sum("test_acc" in h for h in b.history if h["phase"] == "finetune")
        n_ft = sum(h["phase"] == "finetune" for h in b.history)
        sizes = f"{len(data.train)}/{len(data.val)}/{len(data.test)}"
        print(f"{name:16s} {sizes:>15s} {t['all']:7.1f} {t['peak']:7.1f} {t['all'] / t['peak']:6.2f}  "
              f"{n_test:4d}/{n_ft:<4d}  {same}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
