"""Achieved FLOP/s of one training step of the toy model against this machine's matrix
product FLOP/s, measured in the same run on one thread, and where the step's time goes:
the eager step (torch's default AdamW) and the compiled step of the training loop
(``numerics="compiled"``: forward, loss and backward by torch.compile/inductor, fused AdamW).

    python benchmarks/bench_flops.py                 # default model, batch 64, T 32
    python benchmarks/bench_flops.py --d-model 16 --d-mlp 32 --T 16
    python benchmarks/bench_flops.py --no-compiled   # the eager step only

The compiled step's first call (tracing, and compiling unless TORCHINDUCTOR_CACHE_DIR
already holds its kernels) is timed apart, in wall seconds.

FLOPs are counted by torch.utils.flop_counter.FlopCounterMode (matrix products only: the
elementwise work of norms, GELU, softmax and the optimizer is not in the count) and checked
against the analytic count of the model's products. Times are process CPU time. "other
aten ops" are the elementwise kernels (norms, GELU, softmax, adds, copies, the optimizer's
arithmetic) with their dispatch; the 1x2-input step measures the fixed per-op cost alone.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.profiler import profile
from torch.utils.flop_counter import FlopCounterMode

from toyspt.nn.model import ModelConfig, build_model

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")


def cpu_time(fn, reps: int) -> float:
    fn()
    t = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - t) / reps


def analytic_flops(cfg: ModelConfig, B: int, T: int) -> int:
    """Multiply-adds x 2 of every product in forward and backward (one layer group per block)."""
    d, m, tok = cfg.d_model, cfg.d_mlp, B * T
    fwd_tok = (cfg.d_in + 1) * d + cfg.n_layers * (4 * d * d + 2 * T * d + 2 * d * m)
    fwd = 2 * tok * fwd_tok + 2 * B * d * cfg.n_classes
    # backward: grad wrt weights and wrt inputs of every product, except the embedding's input
    return 3 * fwd - 2 * tok * (cfg.d_in + 1) * d


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--T", type=int, default=32)
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--d-mlp", type=int, default=128)
    p.add_argument("--reps", type=int, default=60)
    p.add_argument("--no-compiled", dest="compiled", action="store_false", help="skip the compiled step")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    cfg = ModelConfig(d_model=args.d_model, d_mlp=args.d_mlp)
    model = build_model(cfg, 0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.T, cfg.d_in)
    y = torch.randint(0, cfg.n_classes, (args.batch,))

    def fwd_bwd():
        F.cross_entropy(model.classify(x), y).backward()

    def step():
        opt.zero_grad(set_to_none=True)
        fwd_bwd()
        opt.step()

    with FlopCounterMode(display=False) as fc:
        fwd_bwd()
    flops = fc.get_total_flops()
    t_step, t_fb = cpu_time(step, args.reps), cpu_time(fwd_bwd, args.reps)

    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    peak = 2 * n ** 3 / cpu_time(lambda: a @ b, 10)
    tok = args.batch * args.T
    u, w = torch.randn(tok, cfg.d_model), torch.randn(cfg.d_mlp or cfg.d_model, cfg.d_model)
    own = 2 * tok * cfg.d_model * w.shape[0] / cpu_time(lambda: F.linear(u, w), 200)

    # the same step on a 1 x 2 input: the same ops and Python, almost no arithmetic, so its
    # time is the step's fixed per-op cost (dispatch, autograd, optimizer loop)
    xs, ys = x[:1, :2], y[:1]

    def tiny_step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model.classify(xs), ys).backward()
        opt.step()

    t_tiny = cpu_time(tiny_step, args.reps)

    shares = {"eager": profile_shares(step)}
    compiled = compiled_step(cfg, x, y) if args.compiled else None
    if compiled is not None:
        c_step, c_first = compiled
        t_comp = cpu_time(c_step, args.reps)
        shares["compiled"] = profile_shares(c_step)

    print(f"model d_model={cfg.d_model} d_mlp={cfg.d_mlp}, batch {args.batch} x T {args.T}, "
          f"torch {torch.__version__}, 1 thread")
    analytic = analytic_flops(cfg, args.batch, args.T)
    print(f"FLOPs per step (FlopCounterMode): {flops / 1e6:.1f} M   analytic: {analytic / 1e6:.1f} M")
    print(f"{'':34s} {'ms':>7s} {'GFLOP/s':>8s} {'% of peak':>9s}")
    print(f"{'training step (fwd+bwd+AdamW)':34s} {t_step * 1e3:7.2f} {flops / t_step / 1e9:8.1f} "
          f"{100 * flops / t_step / peak:9.1f}")
    if compiled is not None:
        print(f"{'compiled step (fwd+bwd, fused AdamW)':34s} {t_comp * 1e3:7.2f} {flops / t_comp / 1e9:8.1f} "
              f"{100 * flops / t_comp / peak:9.1f}   ({t_step / t_comp:.2f}x eager; first call {c_first:.1f} s wall)")
    print(f"{'forward+backward only':34s} {t_fb * 1e3:7.2f} {flops / t_fb / 1e9:8.1f} {100 * flops / t_fb / peak:9.1f}")
    print(f"{'matmul 1024^3 (peak reference)':34s} {'':7s} {peak / 1e9:8.1f} {100.0:9.1f}")
    name = f"linear {tok}x{cfg.d_model} -> {w.shape[0]} (step shape)"
    print(f"{name:34s} {'':7s} {own / 1e9:8.1f} {100 * own / peak:9.1f}")
    print(f"{'same step on a 1x2 input (fixed cost)':34s} {t_tiny * 1e3:7.2f}   "
          f"= {100 * t_tiny / t_step:.0f} % of the step")
    for name, share in shares.items():
        total = sum(share.values())
        print(f"\nshare of a {name} step's CPU time (torch.profiler self time, 20 steps):")
        for k in KINDS:
            print(f"  {k:26s} {100 * share[k] / total:5.1f} %")


KINDS = ("matrix products", "other aten ops", "compiled kernels", "autograd bookkeeping", "optimizer", "rest")


def profile_shares(step, n: int = 20) -> dict[str, float]:
    """Self CPU time of ``n`` steps by kind of work."""
    with profile() as prof:
        for _ in range(n):
            step()
    share = defaultdict(float)
    for e in prof.key_averages():
        k = e.key
        kind = ("optimizer" if k.startswith("Optimizer.") or "adam" in k.lower() or "sgd" in k.lower() else
                "matrix products" if k in MATMUL_OPS else
                "compiled kernels" if "compiled" in k.lower() or "cpp_fused" in k or "inductor" in k.lower()
                or k.startswith("##") else
                "other aten ops" if k.startswith("aten::") else
                "autograd bookkeeping" if "autograd" in k or "Backward" in k else "rest")
        share[kind] += e.self_cpu_time_total
    return share


def compiled_step(cfg: ModelConfig, x: torch.Tensor, y: torch.Tensor):
    """The training loop's compiled label step on (x, y) and the wall seconds of its first
    call; None (with the one line of toyspt.train.compiled.available) where inductor
    cannot compile."""
    from toyspt.train.compiled import available
    from toyspt.train.loop import Lockstep, Objective, RunContext
    from toyspt.train.recipes import TrainConfig, make_optimizer
    from toyspt.train.run import label_objective, template

    if not available():
        return None
    lock = Lockstep([RunContext(build_model(cfg, 0), "bench", 0)], template=template(cfg))
    lock.start_phase("finetune", lambda ps: make_optimizer(ps, TrainConfig(), 1e-3, fused=True))
    objective = Objective(lambda rows, gen: (x, y), label_objective)
    t = time.perf_counter()
    lock.compiled_step(objective, [(x, y)])
    first = time.perf_counter() - t
    return (lambda: lock.compiled_step(objective, [(x, y)])), first


if __name__ == "__main__":
    main()
