"""``toyspt lra ...``: inspect an LRA checkpoint, probe it layer by layer and head by head,
or run the offline demo.

    toyspt lra inspect model.ckpt
    toyspt lra probe model.ckpt --task listops --vocab basic_train.tsv --data basic_test.tsv \\
        --n 16 --ref init.ckpt --out report/
    toyspt lra probe model.ckpt --task image --data x.npy --labels y.npy --heads 4
    toyspt lra probe final.ckpt --task digits --data x.npy --labels y.npy --ref init.ckpt
    toyspt lra demo --out lra_demo/
    toyspt lra fields                                  # the run-config fields read

Checkpoints are read without executing code from them; ``--trust-checkpoint`` unpickles
them fully (only for files you trust). Token ids of ListOps follow the training file's
frequency order: pass ``--vocab basic_train.tsv`` (the run's training split) to reproduce
the checkpoint's ids exactly; without it the vocabulary is built from the probed data.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import torch

from toyspt.cli.flags import add_seeds, add_sweep_flags, ascii_float, nonnegative_int, out_dir, positive_int
from toyspt.data.directions import COMPACT
from toyspt.kinds import listops as lo
from toyspt.lra.checkpoint import HEAD_OVERRIDES, ArchHints, LoadedLRA, load_lra
from toyspt.lra.inputs import select
from toyspt.lra.probe_data import N_CLASSES, TASKS, ProbeInputs, probe_inputs
from toyspt.lra.report import ReportConfig, lra_report


def hints(args) -> ArchHints:
    """The architecture flags as the bridge's one hints object."""
    return ArchHints(n_heads=args.heads, causal=args.causal, window=args.window,
                     look_backward=args.look_backward, look_forward=args.look_forward,
                     activation=args.activation, pool=args.pool, use_lengths=args.use_lengths,
                     head=args.head)


def _load(path, args) -> LoadedLRA:
    return load_lra(path, hints(args), trust=args.trust_checkpoint,
                    strict=not args.allow_unexpected, dtype=torch.float64)


def cmd_inspect(args) -> int:
    loaded = _load(args.ckpt, args)
    r = loaded.report
    print(f"{r.path}: {r.attn_kind} attention layout")
    for k, v in r.cfg.items():
        print(f"  {k:16s} {v}")
    for n in r.notes:
        print(f"  note: {n}")
    print(f"  tensors used: {len(r.used)}; not used: {len(r.unused)}")
    for u in r.unused:
        print(f"    unused: {u}")
    return 0


ARCHITECTURE = ("n_layers", "d_model", "n_heads", "d_ff", "encoder", "n_tokens", "d_input",
                "rotary", "window", "causal", "head", "n_classes")  # what --ref must share


def check_same_architecture(loaded: LoadedLRA, ref: LoadedLRA, path: str) -> None:
    """Refuse a --ref whose architecture differs: its displacements would compare unrelated
    matrices."""
    diff = [f"{k} {ref.report.cfg[k]!r} vs {loaded.report.cfg[k]!r}" for k in ARCHITECTURE
            if ref.report.cfg[k] != loaded.report.cfg[k]]
    if diff:
        raise ValueError(f"--ref {path}: another architecture than the probed checkpoint "
                         f"({'; '.join(diff)}); displacements need the same model")


def cmd_probe(args) -> int:
    torch.set_num_threads(args.threads)
    gen = {} if args.data else dict(listops=lo.ListOpsConfig(max_depth=args.max_depth, max_args=args.max_args,
                                                             min_len=args.min_len, max_len=args.max_len))
    inputs = ProbeInputs(task=args.task, n=args.n + args.fit_n, data=args.data, labels=args.labels,
                         vocab=args.vocab, p_mask=args.p_mask, seed=args.seed, **gen)
    loaded = _load(args.ckpt, args)
    inputs.check_model(loaded)
    ref = _load(args.ref, args) if args.ref else None
    if ref is not None:
        check_same_architecture(loaded, ref, args.ref)
    batch, notes = probe_inputs(inputs, loaded)
    n = min(args.n, len(batch["lengths"]))
    probe_batch = select(batch, slice(0, n))
    fit_batch = select(batch, slice(n, None)) if len(batch["lengths"]) > n else probe_batch
    dirs = tuple(d for d in args.directions.split(",") if d)
    rcfg = ReportConfig(directions=dirs, max_offset=args.max_offset, dtype=args.dtype, engine=args.engine,
                        summary_directions=tuple(d for d in ReportConfig().summary_directions if d in dirs)
                        or dirs[:1])
    notes = loaded.report.notes + notes
    arm = (loaded.report.provenance or {}).get("arm")  # written by toyspt.lra.convert.save_run
    if ref:
        notes.append(f"reference {args.ref}: " + "; ".join(n for n in ref.report.notes
                                                          if n.startswith(("heads", "head:"))))
    rep = lra_report(loaded.model, probe_batch, fit_batch=fit_batch, ref=ref.model if ref else None,
                     cfg=rcfg, notes=notes,
                     meta=dict(checkpoint=str(args.ckpt), ref=args.ref, task=args.task, arm=arm,
                               load_report=vars(loaded.report)),
                     n_classes=N_CLASSES.get(args.task))
    print(f"lra probe: {args.ckpt} ({args.task}, {n} examples, {args.dtype})"
          + (f", arm {arm}" if arm else ""))
    for note in rep.notes:
        print(f"  note: {note}")
    print("ratio_D = rms|<dL_label/dS, D>| / rms||dL_label/dS||  over the same for L_recon; "
          "rowhet = row heterogeneity of dL/dS (0 = identical rows)")
    with pd.option_context("display.float_format", "{:.3g}".format, "display.width", 220,
                           "display.max_columns", 40):
        print(rep.table().to_string(index=False))
    if args.out:
        paths = rep.write(args.out, figure=not args.no_figure)
        print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_fields(args) -> int:
    from toyspt.lra.runconfig import table_markdown

    print(table_markdown())
    return 0


def cmd_demo(args) -> int:
    from toyspt.lra.demo import DemoConfig, run_demo
    from toyspt.runs import RunCache, executor_scope

    torch.set_num_threads(args.threads)
    cfg = DemoConfig.quick() if args.quick else DemoConfig()
    with executor_scope(args.workers, args.dask) as ex:
        res = run_demo(cfg, Path(args.out), seeds=args.seeds, progress=True, recompute=args.recompute,
                       cache=RunCache(args.cache), workers=args.workers, executor=ex)
    with pd.option_context("display.float_format", "{:.3g}".format, "display.width", 220):
        print(res.summary.to_string(index=False))
    print(f"wrote {args.out}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heads", type=positive_int, default=None, help="attention heads, when the file has no run config")
    p.add_argument("--head", choices=HEAD_OVERRIDES, default=None,
                   help="treat decoder.0.output_transform as classifier (cls) or SPT decoder (rec), "
                        "or ignore the decoder (none)")
    p.add_argument("--window", type=nonnegative_int, default=None,
                   help="local attention block size (Path-X); 0 = global attention (files without a "
                        "run config and four-linear attention must say which)")
    p.add_argument("--look-backward", type=nonnegative_int, default=None,
                   help="local attention: blocks before the query block (mhfla look_backward)")
    p.add_argument("--look-forward", type=nonnegative_int, default=None,
                   help="local attention: blocks after the query block (mhfla look_forward)")
    c = p.add_mutually_exclusive_group()
    c.add_argument("--causal", dest="causal", action="store_true", default=None,
                   help="causal attention (files without a run config must say --causal or --no-causal)")
    c.add_argument("--no-causal", dest="causal", action="store_false")
    p.add_argument("--pool", choices=("pool", "mean", "max", "last", "first", "sum"), default=None,
                   help="classifier pooling (the run's decoder.mode), for files without a run config")
    u = p.add_mutually_exclusive_group()
    u.add_argument("--use-lengths", dest="use_lengths", action="store_true", default=None,
                   help="pool over each sequence's valid length (decoder.use_lengths=true)")
    u.add_argument("--all-positions", dest="use_lengths", action="store_false",
                   help="pool over all positions, padding included (decoder.use_lengths=false)")
    p.add_argument("--activation", default=None,
                   help="feed-forward activation (model.layer[ff].activation); files without a run "
                        "config must say it unless their tensors show a GLU")
    p.add_argument("--trust-checkpoint", action="store_true",
                   help="unpickle the file fully (can run code from it; trusted files only)")
    p.add_argument("--allow-unexpected", action="store_true",
                   help="report tensors outside the inferred architecture instead of failing")


def register(sub) -> None:
    """Add ``lra inspect|probe|demo`` to the ``toyspt`` parser's subparsers."""
    lra = sub.add_parser("lra", help="LRA checkpoints: inspect, probe per layer/head, offline demo",
                         description=__doc__.split("\n\n")[0])
    lsub = lra.add_subparsers(dest="lra_cmd", required=True)

    i = lsub.add_parser("inspect", help="architecture and key report of a checkpoint")
    i.add_argument("ckpt")
    _common(i)
    i.set_defaults(func=cmd_inspect)

    p = lsub.add_parser("probe", help="label/recon blindness, profiles and displacement per layer and head",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ckpt")
    p.add_argument("--task", choices=TASKS, default="listops")
    p.add_argument("--data", default=None, help="ListOps .tsv (Source<TAB>Target) or .npy array")
    p.add_argument("--labels", default=None, help=".npy labels for --data arrays")
    p.add_argument("--vocab", default=None, help="ListOps vocabulary: the run's basic_train.tsv, or one token per line")
    p.add_argument("--n", type=positive_int, default=16, help="examples probed (one at a time)")
    p.add_argument("--fit-n", type=nonnegative_int, default=64, help="extra examples to fit a missing head on")
    p.add_argument("--ref", default=None, help="second checkpoint: Frobenius displacement of every matrix")
    p.add_argument("--out", type=out_dir, default=None,
                   help="directory for table.csv, records.csv, report.json, report.png")
    p.add_argument("--no-figure", action="store_true")
    p.add_argument("--directions", default=",".join(COMPACT), help="comma-separated score directions")
    p.add_argument("--max-offset", type=positive_int, default=16, help="offsets kept in the profiles")
    p.add_argument("--p-mask", type=ascii_float, default=0.5, help="SPT mask probability (that code's examples: 0.5)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the generated data and the SPT mask")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--engine", choices=("lean", "probes"), default="lean",
                   help="lean: per-layer/per-head score-gradient reduction (long sequences); "
                        "probes: toyspt.probe.engine.probe (full gradients)")
    g = p.add_argument_group("generated ListOps (when --data is not given)")
    g.add_argument("--min-len", type=positive_int, default=501)
    g.add_argument("--max-len", type=positive_int, default=1999)
    g.add_argument("--max-depth", type=positive_int, default=10)
    g.add_argument("--max-args", type=positive_int, default=10)
    _common(p)
    p.set_defaults(func=cmd_probe)

    f = lsub.add_parser("fields", help="every run-config field the bridge reads: honoured values")
    f.set_defaults(func=cmd_fields)

    d = lsub.add_parser("demo", help="train small scratch/SPT ListOps models offline, save, probe")
    d.add_argument("--out", type=out_dir, default="lra_demo")
    d.add_argument("--quick", action="store_true", help="a smaller, faster demo (smoke test)")
    add_seeds(d, "0-2")
    d.add_argument("--threads", type=positive_int, default=1)
    add_sweep_flags(d)
    d.set_defaults(func=cmd_demo)


__all__ = ["register", "cmd_probe", "cmd_inspect", "cmd_demo"]
