"""K seeds of one recipe trained together (toyspt.train.run.run_recipe_seeds) against the same
K runs of toyspt.train.run.run_recipe one after another, side by side in one process, one thread.

    python benchmarks/bench_lockstep.py                       # K=8, spt, two model sizes
    python benchmarks/bench_lockstep.py --K 8 --recipe scratch --n-train 512 --epochs 3
    python benchmarks/bench_lockstep.py --n-train 3000 --n-eval 750 --epochs 1 --sizes default

Throughput is seed-steps per second (optimizer steps of all seeds, SPT and label phases,
evaluation included) over process CPU time, which a busy shared machine disturbs less than
wall time (both are printed). "max |dw|" is the largest difference of any final weight
from the sequential run: 0 means bitwise equal. Both go through the one training loop
(toyspt.train.loop: its flat optimizer buffer and evaluation chunks), so the ratio is
what batching over seeds adds.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from toyspt.data.tasks import TaskConfig, make_task
from toyspt.nn.model import ModelConfig, build_model
from toyspt.train.config import RunConfig
from toyspt.train.evaluation import EVAL_CHUNK, accuracy
from toyspt.train.recipes import TrainConfig
from toyspt.train.run import run_recipe, run_recipe_seeds

SIZES = {  # name -> (model, sequence length)
    "default": (ModelConfig(), 32),  # d_model 32, d_mlp 128
    "small": (ModelConfig(d_model=16, d_mlp=32), 16),
}


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def max_diff(ref, out) -> float:
    return max((a.states["final"][n] - b.states["final"][n]).abs().max().item()
               for a, b in zip(ref, out) for n in a.states["final"])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--K", type=int, default=8, help="seeds")
    p.add_argument("--recipe", default="spt")
    p.add_argument("--n-train", type=int, default=512)
    p.add_argument("--n-eval", type=int, default=256, help="validation and test sequences each")
    p.add_argument("--epochs", type=int, default=2, help="label epochs (SPT epochs the same)")
    p.add_argument("--sizes", default=",".join(SIZES), help="comma-separated subset of the sizes")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    seeds = list(range(args.K))
    print(f"K={args.K} recipe={args.recipe} n_train={args.n_train} n_val=n_test={args.n_eval} epochs={args.epochs}+"
          f"{args.epochs} batch 64, torch {torch.__version__}, 1 thread")
    print(f"{'size':8s} {'mode':10s} {'steps':>6s} {'wall s':>7s} {'cpu s':>7s} {'steps/s':>8s} "
          f"{'x seq':>6s} {'max |dw|':>9s}")
    for name in args.sizes.split(","):
        model, T = SIZES[name]
        task = TaskConfig(T=T, n_train=args.n_train, n_val=args.n_eval, n_test=args.n_eval, seed=0)
        data = make_task(task)
        swap = make_task(replace(task, family="freq_band", seed=1))
        tc = TrainConfig(epochs=args.epochs, pre_epochs=args.epochs)
        run = RunConfig(args.recipe, model, tc)
        ref, w, c = timed(lambda: [run_recipe(run, data, s, pretrain_data=swap) for s in seeds])
        steps = sum(r.history[-1]["step"] for r in ref)
        base = steps / c
        print(f"{name:8s} {'sequential':10s} {steps:6d} {w:7.2f} {c:7.2f} {base:8.0f} {1.0:6.2f} {0.0:9.1e}")
        out, w, c = timed(lambda: run_recipe_seeds(run, data, seeds, pretrain_data=swap))
        print(f"{'':8s} {'together':10s} {steps:6d} {w:7.2f} {c:7.2f} {steps / c:8.0f} {steps / c / base:6.2f} "
              f"{max_diff(ref, out):9.1e}", flush=True)
    # evaluation alone: a large batch against the chunk the loop uses
    x = make_task(TaskConfig(n_train=4500, n_val=8, n_test=8)).train
    net = build_model(ModelConfig(), 0).eval()
    times = {}
    for b in (2048, EVAL_CHUNK):
        _, w, c = timed(lambda: [accuracy(lambda rows: net.classify(x.x[rows]), x.y, b) for _ in range(3)])
        times[b] = c / 3
    print(f"\nevaluation of 4500 sequences (default model, T=32): batch 2048 {times[2048] * 1e3:.0f} ms, "
          f"batch {EVAL_CHUNK} (the loop's) {times[EVAL_CHUNK] * 1e3:.0f} ms cpu "
          f"({times[2048] / times[EVAL_CHUNK]:.2f}x)")


if __name__ == "__main__":
    main()
