"""Flags shared by every front door (``toyspt ...``, ``python paper_figs.py``, ``python -m
theory``): seeds, the run cache, workers, config fields; and one error convention.

Exit codes (every entry point): 0 success; 1 a runtime failure: a checked claim failed
(``theory``) or training diverged (a non-finite loss), printed as one line; 2 bad input: a
usage, config, data or cache error, printed as one ``error: ...`` line; 130 interrupted
(Ctrl-C), printed as one line.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields
from typing import Callable, Mapping, Sequence

from toyspt.data.tasks import TaskConfig
from toyspt.nn.model import ModelConfig
from toyspt.runs.arms import ALIASES, ascii_float, ascii_int, ascii_number, parse_value
from toyspt.runs.cache import DEFAULT_CACHE, CacheError
from toyspt.runs.specs import RunSpec
from toyspt.train.recipes import TrainConfig
from toyspt.util.atomic import WriteError, existing_ancestor, out_file
from toyspt.util.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, interruptible

CONFIGS = (("task", TaskConfig), ("model", ModelConfig), ("train", TrainConfig))
# errors that mean "bad input" (exit 2, one line), a disk fault while writing (WriteError,
# CacheError) included; anything else is a bug and keeps its traceback
INPUT_ERRORS = (ValueError, FileNotFoundError, KeyError, CacheError, ConnectionError, PermissionError,
                WriteError)


MAX_SEEDS = 10_000  # seeds one flag may name: each is a training run, so far beyond any sweep
MAX_SEED = 2 ** 31 - 1  # the largest seed: runs derive streams from it (seed + 7919, ...) within int64
WORKERS_PER_CPU = 4  # --workers beyond this many processes per CPU only fight for the cores


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` -> [0..4]; ``"0,3,7"`` -> [0, 3, 7]; order kept, each seed at most once.

    Refused with a message: anything but non-negative ints and ``lo-hi`` ranges, a reversed
    (empty) range such as ``4-0``, a seed named twice (it would count twice in mean and std),
    more than MAX_SEEDS seeds (checked before a range is expanded, so ``0-100000000`` answers
    at once), a seed above MAX_SEED (``2**63`` once overflowed inside torch). Linear in the
    number of seeds.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("no seeds given")
    seeds: list[int] = []
    seen: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        def digits(t: str) -> bool:  # isdecimal() takes Arabic-Indic digits too
            return t.isascii() and t.isdigit()
        if part.startswith("-") and digits(part[1:]):
            raise argparse.ArgumentTypeError(f"seeds must be >= 0, got {part} in {text!r}")
        if not digits(lo) or (dash and not digits(hi)) or len(part) > 20:
            raise argparse.ArgumentTypeError(f"seeds must look like 0-4 or 0,2,5; got {text!r}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last > MAX_SEED:
            raise argparse.ArgumentTypeError(f"seed {last} in {text!r} is above the largest seed, {MAX_SEED} "
                                             "(2**31 - 1)")
        if last < first:
            raise argparse.ArgumentTypeError(f"empty range {part} in {text!r} (write lo-hi, lo <= hi)")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"more than {MAX_SEEDS} seeds in {text!r} (each seed is a "
                                             "training run)")
        for seed in range(first, last + 1):
            if seed in seen:
                raise argparse.ArgumentTypeError(f"seed {seed} appears twice in {text!r}")
            seen.add(seed)
            seeds.append(seed)
    return seeds


def add_seeds(p: argparse.ArgumentParser, default: str | None = "0-4", help: str | None = None) -> None:
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds(default) if default else None,
                   help=help or f"seeds, e.g. 0-4 or 0,2 (default {default})")


def add_cache_flags(p: argparse.ArgumentParser) -> None:
    """``--cache`` and ``--recompute``."""
    p.add_argument("--cache", type=cache_dir, default=str(DEFAULT_CACHE),
                   help="run cache directory (default $TOYSPT_CACHE or .cache/toyspt)")
    p.add_argument("--recompute", action="store_true", help="retrain runs even when cached")


def add_sweep_flags(p: argparse.ArgumentParser, workers: int = 1) -> None:
    """``--cache``, ``--recompute``, ``--workers``, ``--dask``, ``--no-lockstep``."""
    add_cache_flags(p)
    p.add_argument("--workers", type=workers_count, default=workers,
                   help=f"parallel training processes, at most {WORKERS_PER_CPU} per CPU (default {workers})")
    p.add_argument("--dask", default=None, metavar="ADDRESS",
                   help="train on a dask.distributed scheduler (tcp://host:8786) or 'local' (dask extra)")
    p.add_argument("--no-lockstep", action="store_true",
                   help="train seeds one at a time (results are bitwise identical, only slower)")


def add_ledger_flag(p: argparse.ArgumentParser, default: str = "none") -> None:
    """``--ledger PATH``: a results ledger the sweep records every finished entry of its data in."""
    p.add_argument("--ledger", default=None, metavar="PATH",
                   help=f"a results ledger (docs/ledger.md; default {default}, 'none': no ledger): every finished "
                        "run of the data it covers is recorded there, and a run the cache lacks is answered by its "
                        "record where no weights are needed")


def open_ledger(path: str | None, study, tier: str = "", answers: bool = True):
    """The ledger ``--ledger`` names, as ``study`` declares it (a :class:`toyspt.runs.ledger.StudyLedger`,
    or the data kinds it covers), or None for none (``None`` or ``none``); a path that cannot be
    a ledger file is refused before any work."""
    from pathlib import Path

    from toyspt.runs.ledger import StudyLedger

    if path is None or path == "none":
        return None
    if not path.strip():
        raise ValueError("--ledger: an empty path (give a file, or 'none' for no ledger)")
    try:
        out_file(path)  # appended to: a folder, a device or a path under a file is refused before any work
    except argparse.ArgumentTypeError as e:
        raise ValueError(f"--ledger: {e}") from None
    if not isinstance(study, StudyLedger):
        study = StudyLedger(Path(path), tuple(study))
    return study.open(path, tier=tier, answers=answers)


def store_of(cache: str | None, ledger):
    """The store a sweep uses: the run cache at ``cache``, before ``ledger`` where there is one."""
    from toyspt.runs.cache import RunCache
    from toyspt.runs.store import layered

    return layered(RunCache(cache), ledger)


def add_numerics_flag(p: argparse.ArgumentParser) -> None:
    """``--compile`` / ``--no-compile`` (default): the numerics path of toy and UCR runs."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--compile", dest="compile", action="store_true", default=False,
                   help="train with compiled steps (torch.compile + fused AdamW; other rounding, so other "
                        "cache entries; eager with one line where inductor cannot compile)")
    g.add_argument("--no-compile", dest="compile", action="store_false",
                   help="train with today's eager steps, bitwise as before (the default)")


def numerics_of(args: argparse.Namespace) -> str:
    """"compiled" where ``--compile`` asks and inductor compiles here (toyspt.train.compiled:
    else one line on stderr, and "eager"), with inductor's cache in a folder of this user's
    (:func:`toyspt.train.compiled.use_private_inductor_cache`: never inside the run cache, which
    may be shared, since inductor imports and runs what its cache holds; worker processes
    inherit it); "eager" otherwise."""
    if not getattr(args, "compile", False):
        return "eager"
    from toyspt.train.compiled import available, use_private_inductor_cache

    use_private_inductor_cache(args.cache)
    return "compiled" if available() else "eager"


def add_evaluate_flag(p: argparse.ArgumentParser, default: str) -> None:
    """``--evaluate``: the evaluation policy of the runs (toyspt.train.evaluation)."""
    from toyspt.train.evaluation import POLICIES

    p.add_argument("--evaluate", choices=POLICIES, default=default,
                   help="what label epochs measure: 'all' = train/val/test accuracy every epoch; 'peak' = "
                        "validation every epoch, test where validation peaks and at the end (the same "
                        f"summaries, less work) (default {default})")


def _int_at_least(text: str, low: int, words: str) -> int:
    try:
        v = ascii_number(text, int, words)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {v}")
    return v


def positive_int(text: str) -> int:
    """An argparse type: an int >= 1 (``--n 0``, ``--threads 0`` and ``--n -5`` are refused)."""
    return _int_at_least(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """An argparse type: an int >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def max_workers() -> int:
    """The most training processes ``--workers`` may ask for: WORKERS_PER_CPU per CPU here."""
    return WORKERS_PER_CPU * (os.cpu_count() or 1)


def workers_count(text: str) -> int:
    """An argparse type for ``--workers``: an int from 1 to :func:`max_workers`; more is refused,
    not capped (10,000 once started 860 processes that finished nothing in two minutes)."""
    v = _int_at_least(text, 1, "a positive integer")
    if v > max_workers():
        raise argparse.ArgumentTypeError(f"{v} processes is more than {WORKERS_PER_CPU} per CPU of this machine's "
                                         f"{os.cpu_count() or 1} (at most {max_workers()}); more only fight for "
                                         "the cores")
    return v


def reference_dir(text: str) -> str:
    """An argparse type for ``--compare-to``: a folder of figure CSVs, each read (bounded) and
    checked at parse time, before any work (:func:`toyspt.figs.check.check_reference`)."""
    from toyspt.figs.check import CompareError, check_reference

    try:
        check_reference(text)
    except CompareError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--compare-to ")) from None
    return text


def cache_dir(text: str) -> str:
    """An argparse type for ``--cache``: a non-empty path (``--cache ''`` once made the current
    folder a run cache)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path; name the run cache's folder (default $TOYSPT_CACHE or "
                                         ".cache/toyspt)")
    return text


def out_dir(text: str) -> str:
    """An argparse type for ``--out``: a folder to write into, refused at parse time (before
    any training) when the path names an existing file or lies under one."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    path = os.path.abspath(text)
    probe = existing_ancestor(path)
    if os.path.exists(probe) and not os.path.isdir(probe):
        where = "" if probe == path else f" ({probe} is a file)"
        raise argparse.ArgumentTypeError(f"{text} must be a folder to write into, but it names an "
                                         f"existing file{where}")
    return text


def split_unique(text: str, flag: str, what: str) -> list[str]:
    """Comma-separated names, each at most once (a name twice would count one run twice)."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    if not names:
        raise ValueError(f"{flag}: no {what} named in {text!r}")
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"{flag}: {what} {n!r} appears twice in {text!r} (it would count twice)")
        seen.add(n)
    return names


def default_workers() -> int:
    return os.cpu_count() or 1


def add_config_flags(p: argparse.ArgumentParser, parts: Sequence[str] = ("task", "model", "train"),
                     defaults: Mapping[str, Mapping[str, object]] | None = None) -> None:
    """One ``--part.field`` flag per config field (values parsed like the default).
    ``defaults`` names per-part defaults that differ from the config's own (shown in --help)."""
    defaults = defaults or {}
    for part, cls in CONFIGS:
        if part not in parts:
            continue
        g = p.add_argument_group(f"{part} config")
        for f in fields(cls):
            shown = defaults.get(part, {}).get(f.name, getattr(cls(), f.name))
            g.add_argument(f"--{part}.{f.name}", dest=f"{part}.{f.name}", default=None,
                           metavar=type(getattr(cls(), f.name)).__name__.upper(),
                           help=f"(default {shown!r})")


def config_values(args: argparse.Namespace, part: str) -> dict[str, object]:
    """The ``--part.field`` values given on the command line, parsed; a value that does not
    parse raises ValueError naming its flag."""
    cls = dict(CONFIGS)[part]
    default = cls()
    out = {}
    for f in fields(cls):
        v = getattr(args, f"{part}.{f.name}", None)
        if v is not None:
            try:
                out[f.name] = parse_value(v, getattr(default, f.name))
            except ValueError as e:
                raise ValueError(f"--{part}.{f.name}: {e}") from None
    return out


def make_config(part: str, cls, kw: dict[str, object]):
    """``cls(**kw)``; a refusal names the flag when a flag set that field."""
    try:
        return cls(**kw)
    except ValueError as e:
        # config errors start with the field ("T: ..."); name it as the flag if one set it
        name = str(e).split(":", 1)[0].split("[", 1)[0]
        prefix = f"--{part}." if name in kw else f"{part} config: "
        raise ValueError(f"{prefix}{e}") from None


def base_spec(args: argparse.Namespace, recipe: str = "scratch", seed: int = 0) -> RunSpec:
    """The spec the config flags describe (ValueError, one line naming the flag, when not)."""
    cfgs = {part: make_config(part, cls, config_values(args, part)) for part, cls in CONFIGS}
    spec = RunSpec(recipe=recipe, seed=seed, data=cfgs["task"], model=cfgs["model"], train=cfgs["train"],
                   evaluate=getattr(args, "evaluate", "all"), numerics=numerics_of(args))
    check_storable(spec)
    return spec


def add_arms_flag(p: argparse.ArgumentParser, default: str) -> None:
    """``--arms`` (alias ``--recipes``): comma-separated arms."""
    p.add_argument("--arms", "--recipes", dest="arms", default=default,
                   help=f"comma-separated arms (recipe[:key=value,...]); aliases: {', '.join(sorted(ALIASES))}")


def split_arms(text: str) -> list[str]:
    """The arms of ``--arms``; an arm named twice (also as an alias and its expansion, or with
    an empty override list: ``scratch`` and ``scratch:``) is refused. :func:`distinct_arms` checks
    what the arms mean, once a base spec is known."""
    arms = split_unique(text, "--arms", "arm")
    split_unique(",".join(ALIASES.get(a, a).rstrip(":") for a in arms), "--arms", "arm (after aliases)")
    return arms


def distinct_arms(arms: Sequence[str], base: RunSpec) -> list[RunSpec]:
    """The spec of each arm on ``base``; two arms that are one run (``scratch`` and
    ``scratch:pos=sinusoidal``, the default) are refused, and so is a run the cache could not
    store (:func:`check_storable`)."""
    from toyspt.runs.arms import arm_spec

    seen: dict[str, str] = {}
    specs = []
    for a in arms:
        spec = arm_spec(a, base)
        first = seen.setdefault(spec.key(), a)
        if first != a:
            raise ValueError(f"--arms: {a!r} and {first!r} are one run (the same recipe and configs); it would "
                             "count twice")
        check_storable(spec, f"--arms {a}: ")
        specs.append(spec)
    return specs


def check_storable(spec: RunSpec, where: str = "") -> None:
    """Refuse, before anything trains, a run whose stored weights would exceed what the run
    cache reads back (``weights.pt``: :data:`toyspt.runs.cache.MAX_BYTES`): its initial, final
    (and pretrained) weights and AdamW's two moments, counted from the model's config."""
    import torch

    from toyspt.nn.model import ToyTransformer
    from toyspt.runs.cache import MAX_BYTES

    with torch.device("meta"):  # shapes only: nothing is allocated
        model = ToyTransformer(spec.model)
    params = sum(p.numel() for p in model.parameters())
    state = params + sum(b.numel() for b in model.buffers())
    rec = spec.rec
    total = 4 * (state * (2 + rec.pretrains) + 2 * params * rec.label_phase)
    limit = MAX_BYTES["weights.pt"]
    if total > limit:
        raise ValueError(f"{where}model: {params} parameters; a {spec.recipe} run stores about {total} bytes of "
                         f"weights and optimizer state, over the run cache's limit of {limit} bytes for an entry; "
                         "refused before training (choose a smaller --model.d_model, d_mlp or n_layers)")


def run_main(fn: Callable[[], int]) -> int:
    """Call an entry point's body with the exit-code convention of this module."""
    try:
        return interruptible(fn)
    except INPUT_ERRORS as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {' '.join(str(msg).split())}", file=sys.stderr)
        return EXIT_USAGE
    except FloatingPointError as e:  # a run diverged: a runtime failure, not bad input
        print(f"error: {' '.join(str(e).split())} (the run diverged; a smaller learning rate or "
              "scale may train)", file=sys.stderr)
        return EXIT_FAILED


__all__ = ["CONFIGS", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INTERRUPTED", "parse_seeds", "add_seeds",
           "add_cache_flags", "add_sweep_flags", "add_numerics_flag", "numerics_of", "ascii_int", "ascii_float",
           "positive_int", "nonnegative_int", "out_dir", "out_file",
           "split_unique", "default_workers", "add_config_flags", "config_values", "make_config",
           "base_spec", "add_arms_flag", "split_arms", "distinct_arms", "check_storable", "run_main", "MAX_SEEDS",
           "MAX_SEED", "max_workers", "workers_count", "cache_dir", "reference_dir"]
