"""Run specs, an on-disk run cache, and sweeps through a ``concurrent.futures.Executor``.

A :class:`RunSpec` (task, model, train config, recipe, seed, trackers) hashes stably to a
directory ``<cache>/<hash[:2]>/<hash>/`` holding ``spec.json``, ``result.json`` (history,
summary, tracker records, configs), ``weights.pt`` (tensors only, loadable with
``weights_only=True``) and ``manifest.json`` (sha256 of each file). An entry is written in
a temporary directory and renamed into place, so a killed run leaves no half entry; an
entry whose manifest does not match its files is treated as missing and recomputed.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Sequence

import torch
from tqdm.auto import tqdm

from .model import ModelConfig
from .tasks import TaskConfig, make_task
from .train import RunResult, TrainConfig, run_recipe

DEFAULT_CACHE = Path(os.environ.get("TOYSPT_CACHE", ".cache/toyspt"))
FORMAT_VERSION = 1  # bump when the meaning of a cached entry changes


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one run."""

    recipe: str  # one of toyspt.train.RECIPES
    seed: int = 0  # model init and data order
    task: TaskConfig = field(default_factory=TaskConfig)  # the labelled task
    model: ModelConfig = field(default_factory=ModelConfig)  # architecture
    train: TrainConfig = field(default_factory=TrainConfig)  # optimisation and SPT settings
    swap_task: TaskConfig | None = None  # data_swap: the task SPT runs on
    trackers: tuple[str, ...] = ()  # names of tracker callbacks (toyspt.tracking)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["format"] = FORMAT_VERSION
        return d

    def key(self) -> str:
        """Stable content hash of the spec."""
        blob = json.dumps(_jsonable(self.to_dict()), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return "nan"
    return obj


def spec_from_dict(d: dict[str, Any]) -> RunSpec:
    """Inverse of ``RunSpec.to_dict`` (lists become tuples again)."""

    def build(cls, sub):
        if sub is None:
            return None
        kw = {}
        for f in fields(cls):
            if f.name in sub:
                v = sub[f.name]
                kw[f.name] = tuple(v) if isinstance(v, list) else v
        return cls(**kw)

    return RunSpec(recipe=d["recipe"], seed=d["seed"], task=build(TaskConfig, d["task"]),
                   model=build(ModelConfig, d["model"]), train=build(TrainConfig, d["train"]),
                   swap_task=build(TaskConfig, d.get("swap_task")),
                   trackers=tuple(d.get("trackers", ())))


def execute(spec: RunSpec, progress: bool = False) -> RunResult:
    """Train the run a spec describes (no cache). A spec of another kind (e.g. a UCR run)
    brings its own ``execute``. Runs on one thread: these models are far too small to gain
    from more, and extra threads thrash when processes share cores."""
    own = getattr(spec, "execute", None)
    if own is not None:
        return own(progress)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _execute(spec, progress)
    finally:
        torch.set_num_threads(threads)


def _execute(spec: RunSpec, progress: bool) -> RunResult:
    data = make_task(spec.task)
    swap = make_task(spec.swap_task) if spec.swap_task is not None else None
    if spec.recipe == "data_swap" and swap is None:
        raise ValueError("a data_swap spec needs swap_task")
    callbacks = ()
    if spec.trackers:
        from .tracking import make_trackers  # imported only when a spec asks for trackers
        callbacks = make_trackers(spec.trackers, data)
    return run_recipe(spec.recipe, data, spec.model, spec.train, spec.seed,
                      callbacks=callbacks, pretrain_data=swap,
                      progress=progress)


# --------------------------------------------------------------------------------------
# the cache

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class RunCache:
    """A directory of finished runs keyed by spec hash."""

    def __init__(self, root: str | os.PathLike = DEFAULT_CACHE):
        self.root = Path(root)

    def path(self, spec: RunSpec) -> Path:
        k = spec.key()
        return self.root / k[:2] / k

    def has(self, spec: RunSpec) -> bool:
        return self.load(spec) is not None

    def load(self, spec: RunSpec) -> RunResult | None:
        """The cached result, or None when missing or corrupted (a corrupted entry is removed)."""
        d = self.path(spec)
        try:
            ino = d.stat().st_ino
        except FileNotFoundError:
            return None
        try:
            manifest = json.loads((d / "manifest.json").read_text())
            for name, digest in manifest.items():
                if _sha256(d / name) != digest:
                    raise ValueError(f"checksum mismatch in {d / name}")
            res = json.loads((d / "result.json").read_text())
            states = torch.load(d / "weights.pt", weights_only=True)
        except Exception:  # any damage: drop the entry, the caller recomputes it
            with contextlib.suppress(OSError):  # unless another worker has just replaced it
                if d.stat().st_ino == ino:
                    shutil.rmtree(d, ignore_errors=True)
            return None
        return RunResult(res["recipe"], res["seed"], res["history"], res["summary"], res["records"],
                         states, res["config"])

    def store(self, spec: RunSpec, result: RunResult) -> Path:
        """Write an entry atomically (temp dir + rename); a concurrent writer of the same
        spec loses the race harmlessly."""
        final = self.path(spec)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        try:
            (tmp / "spec.json").write_text(json.dumps(_jsonable(spec.to_dict()), indent=1))
            res = dict(recipe=result.recipe, seed=result.seed, history=result.history,
                       summary=result.summary, records=result.records, config=result.config)
            (tmp / "result.json").write_text(json.dumps(_jsonable(res)))
            torch.save(result.states, tmp / "weights.pt")
            manifest = {n: _sha256(tmp / n) for n in ("spec.json", "result.json", "weights.pt")}
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
            for _ in range(5):  # another worker may be writing or dropping the same entry
                try:
                    os.rename(tmp, final)
                    break
                except OSError:  # already there (another worker): keep theirs if it is sound
                    if self.load(spec) is not None:
                        break
                    shutil.rmtree(final, ignore_errors=True)
            else:
                raise OSError(f"could not place cache entry {final}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final


def _run_and_store(spec: RunSpec, root: str) -> str:
    """Worker entry point: train one spec and store it; returns the spec key."""
    torch.set_num_threads(1)
    RunCache(root).store(spec, execute(spec))
    return spec.key()


def get_run(spec: RunSpec, cache: RunCache | None = None, recompute: bool = False,
            progress: bool = False) -> RunResult:
    """One run through the cache."""
    cache = cache or RunCache()
    if not recompute:
        hit = cache.load(spec)
        if hit is not None:
            return hit
    result = execute(spec, progress=progress)
    cache.store(spec, result)
    return result


def sweep(specs: Sequence[RunSpec], cache: RunCache | None = None, workers: int = 1,
          executor: cf.Executor | None = None, recompute: bool = False, progress: bool = True,
          desc: str = "runs", vectorize: bool = False) -> list[RunResult]:
    """All ``specs`` through the cache; missing runs go to ``executor`` (default: a process
    pool of ``workers``, or in-process for one worker; any concurrent.futures.Executor, see
    toyspt.engines). Each finished run is stored as soon as it ends, so an interrupted sweep
    resumes where it stopped. ``vectorize``: specs that differ only by seed and have no
    trackers train together (toyspt.vectorized's lockstep engine, bitwise equal to one run
    at a time, so the cache never depends on it); such a group is stored when it ends."""
    cache = cache or RunCache()
    unique = list({s.key(): s for s in specs}.values())
    if recompute:
        for s in unique:
            shutil.rmtree(cache.path(s), ignore_errors=True)
    done = {s.key(): r for s in unique if (r := cache.load(s)) is not None}  # load once
    todo = [s for s in unique if s.key() not in done]
    bar = tqdm(total=len(todo), desc=desc, disable=not progress or not todo)
    if todo:
        from .engines import plan_jobs, run_job, slots  # engines imports this module

        own = executor is None and workers > 1
        ex = cf.ProcessPoolExecutor(workers) if own else executor
        jobs = plan_jobs(todo, min_jobs=slots(ex, workers)) if vectorize else [[s] for s in todo]
        try:
            if ex is None:
                for job in jobs:
                    if len(job) == 1:
                        cache.store(job[0], execute(job[0]))
                    else:
                        run_job(job, cache.root)
                    bar.update(len(job))
            else:
                futures = {ex.submit(_run_and_store, job[0], str(cache.root)) if len(job) == 1
                           else ex.submit(run_job, job, str(cache.root)): len(job) for job in jobs}
                for fut in cf.as_completed(futures):
                    fut.result()
                    bar.update(futures[fut])
        finally:
            bar.close()
            if own:
                ex.shutdown(cancel_futures=True)
    for s in todo:
        res = cache.load(s)
        if res is None:
            raise RuntimeError(f"run {s.key()} ({s.recipe}, seed {s.seed}) is missing from the cache "
                               "after the sweep")
        done[s.key()] = res
    return [done[s.key()] for s in specs]


def with_overrides(spec: RunSpec, **overrides) -> RunSpec:
    """A copy of ``spec`` with sub-config fields replaced; keys are ``part__name`` with part
    in task, model, train (e.g. ``model__pos="alibi"``)."""
    parts = dict(task=spec.task, model=spec.model, train=spec.train)
    for key, value in overrides.items():
        part, _, name = key.partition("__")
        if part not in parts or not any(f.name == name for f in fields(parts[part])):
            raise ValueError(f"unknown config field {part}.{name}")
        parts[part] = replace(parts[part], **{name: value})
    return replace(spec, **parts)


__all__ = ["RunSpec", "RunCache", "execute", "get_run", "sweep", "spec_from_dict", "with_overrides",
           "DEFAULT_CACHE"]
