"""Circulant label cosines on the default task against their float64 bound.

    python -m theory.circulant_bound [--seeds 0 1 2 3 4] [--n 256]

The setting of benchmarks/blindness_at_init.py's first row (theory's T1 setting,
W_Q = W_K = 0, the first ``n`` training sequences of the default task, mask seed = model
seed): for each seed, |cos| of the batch label gradient with circ_w1, circ_w2, circ_w4 and
the bound of :func:`theory.geometry.blind_cos_bound` it must stay under (T2.5 holds the same
bound on its own batch).
"""
from __future__ import annotations

import argparse

import torch

from toyspt.data.tasks import make_task
from toyspt.nn.model import ModelConfig
from toyspt.probe import engine as probes
from toyspt.probe import losses

from . import geometry as geo
from . import toy
from .t2_blindness import TOY_BLIND, _n_upstream


def rows(seeds, n: int) -> list[dict]:
    data = make_task()
    x, y = data.train.x[:n].double(), data.train.y[:n]
    out = []
    for seed in seeds:
        model = toy.toy_model(ModelConfig(d_mlp=0, final_norm=False, qk_init_scale=0.0), seed)
        batch = losses.make_batch(x, y, seed=seed)
        lp = probes.probe(model, batch, "label", list(TOY_BLIND), use_jvp=False)[toy.HOOK_S]
        A, Gam = toy.pattern_grad(model, batch)
        b = geo.blind_cos_bound(lp.per_example.G[:, 0], A * Gam.abs(),
                                _n_upstream(x.shape[1], model.cfg.d_model, model.cfg.n_classes))
        out.append(dict(seed=seed, cos=dict(zip(TOY_BLIND, lp.cos[0].abs().tolist())),
                        bound=b["batch"], kappa_A=b["kappa_A"], kappa_B=b["kappa_B"]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m theory.circulant_bound", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--n", type=int, default=256, help="training sequences in the batch")
    args = ap.parse_args(argv)
    if args.n <= 0:
        ap.error(f"--n: must be positive, got {args.n}")
    torch.set_num_threads(1)
    res = rows(args.seeds, args.n)
    for r in res:
        cos = " ".join(f"{k} {v:.1e}" for k, v in r["cos"].items())
        print(f"seed {r['seed']}: |cos| {cos}; bound {r['bound']:.1e} "
              f"(kappa_A {r['kappa_A']:.1f}, kappa_B {r['kappa_B']:.1f})")
    worst = max(max(r["cos"].values()) for r in res)
    ok = all(max(r["cos"].values()) <= r["bound"] for r in res)
    print(f"max |cos| {worst:.1e}; bounds {min(r['bound'] for r in res):.1e}.."
          f"{max(r['bound'] for r in res):.1e}; every cosine within its bound: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
