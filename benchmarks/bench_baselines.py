"""Seconds and test accuracy of the UCR reference classifiers (toyspt.ucr.reference) on the paper's four sets.

    python benchmarks/bench_baselines.py [--sets GunPoint,ECG200] [--seed 0]

Prints, per set, baseline and protocol, the training and test series, the test accuracy and
the seconds to fit and predict (one process; the first line is the seconds importing pyts
takes, mostly numba compiling its kernels, paid once per process). Needs the ``baselines``
extra (pyts), and ``ucr-all`` for the three sets beyond GunPoint; a set that cannot be found is
skipped with the reason. Measured on the 2-core machine shared with a training job (load about
5), pyts 0.14.1, seed 0: import and compile 259 s, the four sets 341 s (per set and protocol:
1-NN DTW 10-81 s, ROCKET 3-13 s).
"""
from __future__ import annotations

import argparse
import os
import time

from toyspt.ucr import reference as bl
from toyspt.ucr.data import PAPER_DATASETS, available


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(PAPER_DATASETS), help="comma-separated UCR set names")
    ap.add_argument("--seed", type=int, default=0, help="ROCKET's kernel seed")
    args = ap.parse_args(argv)
    print(f"{bl.LIBRARY} {bl.library_version()}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    t = time.perf_counter()
    bl.make_classifier("1nn_dtw"), bl.make_classifier("rocket")
    print(f"import and compile: {time.perf_counter() - t:.1f} s")
    found, skipped = available(args.sets.split(","))
    for name, why in skipped.items():
        print(f"{name}: skipped ({why.splitlines()[0]})")
    print(f"{'dataset':<16} {'baseline':<8} {'protocol':<10} {'n_train':>7} {'n_test':>6} {'test_acc':>8} "
          f"{'seconds':>8}")
    total = time.perf_counter()
    for d in found:
        for r in bl.evaluate(d, args.seed):
            print(f"{r['dataset']:<16} {r['baseline']:<8} {r['protocol']:<10} {r['n_train']:>7} {r['n_test']:>6} "
                  f"{r['test_acc']:>8.4f} {r['seconds']:>8.1f}", flush=True)
    print(f"all sets: {time.perf_counter() - total:.1f} s; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
