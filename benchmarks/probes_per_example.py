"""Per-example probe gradients: torch.func (vmap of grad, as in toyspt.probe.engine) against a
Python loop of one autograd call per example. Both give dL/dS per example and the
per-example gradients of W_Q and W_K, in float64, on the default task and model.

    python benchmarks/probes_per_example.py [--batch 64 256] [--repeats 3]

"torch.func" times ``probes.per_example_grads`` (float64 copy of the model included); the
loop reuses one float64 copy and only differentiates each example, so both produce the
same tensors. "probe" times a whole ``probes.probe(..., per_example=True, use_jvp=False)``
call, which adds the batched pass, dL/dM and the summaries on top.
"""
from __future__ import annotations

import argparse
import time

import torch

from toyspt.data.tasks import make_task
from toyspt.nn.attention import hooks
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe import engine as probes
from toyspt.probe import instrument, losses

SITE = "blocks.0.attn.hook_attn_scores"


def loop_per_example(model, batch, loss_fn):
    """One autograd.grad per example: (B, H, T, T) score grads, (B, d, d) W_Q and W_K grads."""
    work = instrument.working_model(model, torch.float64)
    gS, gQ, gK = [], [], []
    with work as m:
        attn = m.blocks[0].attn
        for b in range(len(batch["x"])):
            one = {k: (v[b:b + 1].double() if v.is_floating_point() else v[b:b + 1]) for k, v in batch.items()}
            box = {}

            def add_zero(s, name):
                box["d"] = torch.zeros_like(s, requires_grad=True)
                return s + box["d"]

            with hooks(m, [(SITE, add_zero)]):
                L = loss_fn(m, one)
            g = torch.autograd.grad(L, [box["d"], attn.W_Q.weight, attn.W_K.weight])
            gS.append(g[0][0]), gQ.append(g[1]), gK.append(g[2])
    return torch.stack(gS), torch.stack(gQ), torch.stack(gK)


def best_of(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    data = make_task()
    model = build_model(ModelConfig(), seed=0)
    print(f"torch {torch.__version__}, 1 thread, default task (T={data.config.T}) and model, float64")
    print(f"{'loss':>6} {'B':>5} {'torch.func s':>13} {'loop s':>8} {'speed-up':>9} {'max |diff|':>11}"
          f" {'probe s':>8} {'loop/probe':>10}")
    for loss in ("label", "recon"):
        name, fn = instrument.resolve_loss(loss)
        for B in args.batch:
            batch = losses.make_batch(data.train.x[:B], data.train.y[:B], seed=0)
            probes.probe(model, batch, loss, ["prev"], use_jvp=False)  # warm-up
            t_func, pe = best_of(lambda: probes.per_example_grads(model, batch, loss), args.repeats)
            t_probe, _ = best_of(lambda: probes.probe(model, batch, loss, ["prev"], use_jvp=False), args.repeats)
            t_loop, (gS, gQ, gK) = best_of(lambda: loop_per_example(model, batch, fn), args.repeats)
            diff = max((pe.scores[SITE] - gS).abs().max().item(),
                       (pe.weights["blocks.0.attn.W_Q.weight"] - gQ).abs().max().item(),
                       (pe.weights["blocks.0.attn.W_K.weight"] - gK).abs().max().item())
            print(f"{name:>6} {B:>5} {t_func:>13.3f} {t_loop:>8.3f} {t_loop / t_func:>8.1f}x {diff:>11.1e}"
                  f" {t_probe:>8.3f} {t_loop / t_probe:>9.1f}x")


if __name__ == "__main__":
    main()
