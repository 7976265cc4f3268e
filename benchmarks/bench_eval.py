"""Evaluation of a split, old against new: 512 rows per forward (before) against the token
budget (``toyspt.train.evaluation.EVAL_TOKENS`` tokens per forward: long series in fewer rows),
side by side, on the toy task's and every available UCR paper set's test split. One thread;
the best of ``--repeat`` timings. The logits are bitwise the same either way
(tests/unit/train/test_evaluation.py).

    python benchmarks/bench_eval.py
    python benchmarks/bench_eval.py --repeat 20 --sets GunPoint,ECGFiveDays
"""
from __future__ import annotations

import argparse
import os
import time

import torch

from toyspt.data.tasks import TaskConfig, make_task
from toyspt.nn.model import ModelConfig, build_model
from toyspt.train.evaluation import eval_rows, scores
from toyspt.ucr.data import PAPER_DATASETS, UCRSource, available
from toyspt.ucr.runs import UCR_MODEL_DEFAULTS

OLD_ROWS = 512


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--sets", default=",".join(PAPER_DATASETS), help="UCR sets (comma-separated)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cases = [("toy (T 32)", build_model(ModelConfig(), 0), make_task(TaskConfig()).test)]
    found, skipped = available([n for n in args.sets.split(",") if n])
    for d in found:
        cases.append((f"{d.config.name} (T {d.length})", build_model(UCRSource.of(d).fit(
            ModelConfig(**UCR_MODEL_DEFAULTS)), 0), d.test))
    load = os.getloadavg()
    print(f"evaluation of a test split, one thread, best of {args.repeat}; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f}" + (f"; not found: {', '.join(skipped)}" if skipped else ""))
    print(f"{'split':28s} {'rows':>6s} {'old rows/fwd':>12s} {'old s':>9s} {'new rows/fwd':>12s} {'new s':>9s} "
          f"{'old/new':>8s}")
    for name, model, split in cases:
        model.eval()
        new_rows = eval_rows(split.x.shape[1])

        def run(rows, model=model, split=split):
            return scores(lambda r: model.classify(split.x[r]), split.y, rows)

        assert run(OLD_ROWS) == run(new_rows)  # the same numbers
        old, new = best(lambda: run(OLD_ROWS), args.repeat), best(lambda: run(new_rows), args.repeat)
        print(f"{name:28s} {len(split):6d} {OLD_ROWS:12d} {old:9.4f} {new_rows:12d} {new:9.4f} {old / new:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
