"""Retrain ledger records and compare every number bit for bit, under the kernels each record
names (``toyspt ledger verify``; :mod:`toyspt.runs.kernels`).

A record's run is retrained from nothing in a fresh process whose environment caps torch and
oneDNN at the record's instruction sets (``ATEN_CPU_CAPABILITY``, ``ONEDNN_MAX_CPU_ISA``); a host
whose CPU does not offer the recorded sets is told so, and nothing is compared. These caps are
not enough across CPU models: torch's float32 matrix products go through MKL, which picks its
kernels by CPU model, and the study's AMD EPYC (AVX2) records retrained on an Intel Xeon
(AVX-512) host under both caps, with ``MKL_ENABLE_INSTRUCTIONS=AVX2`` too, differ from the
second epoch on by about 1e-8 (docs/reproducibility.md). A record made on another CPU model than
this host's is still retrained and compared, and its outcome says so (:data:`OTHER_MODEL`).
A run that continues another (``spt`` continues
``spt_only``) retrains its parent first, and the parent's record, where the ledger has one, is
compared too. Runs train as the sweep trained them, through the lockstep engine (alone first);
a run that then differs and was trained in a lockstep group is retrained in its original
group: the records of its ``group()`` whose ``seconds`` are the same number (the sweep gives
each run of a job the job's seconds divided by its size, :func:`toyspt.runs.sweeps.train_job`).
What is compared: the entry's JSON as the record keeps it (history, summary, kept tracker
records, config), every number's text; not its ``seconds`` (wall time, not a result).
Asked to retrain anyway (``--anyway``), a record whose kernels this host lacks (an AMX ISA on a
host without AMX) is retrained under the nearest this host offers, each setting changed said, and
a record not reproduced bit for bit is judged against a float32 tolerance derived from its
model's sums (:mod:`toyspt.runs.closeness`): ``within tolerance`` or ``differs``, each differing
number's largest difference and the epoch where it lies named.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

from toyspt.runs import kernels
from toyspt.runs.closeness import judge, terms, tolerance
from toyspt.runs.exact import decode
from toyspt.runs.ledger import Ledger, cpu_model, differences, numbers

MAX_SHOWN = 5  # differing numbers named per record
OTHER_MODEL = ("made on {cpu}, this host is {here}: MKL chooses its matrix kernels by CPU model, so a "
               "difference here may be the host's, not the record's")


@dataclass
class Outcome:
    """What verifying one record found."""

    key: str
    label: str
    status: str  # reproduced | differs | not verified
    detail: str = ""  # the differing numbers, or why nothing was compared
    assumed: list[str] = field(default_factory=list)  # kernel settings the record does not name
    group: int = 1  # runs retrained together with it (its original lockstep group where that mattered)
    also: list[str] = field(default_factory=list)  # parents' records compared on the way
    gaps: list[str] = field(default_factory=list)  # --anyway: each differing number's largest difference

    def lines(self) -> list[str]:
        head = f"{self.status}: {self.label}" + (f" (in its lockstep group of {self.group})" if self.group > 1 else "")
        out = [head] + [f"  {x}" for x in ([self.detail] if self.detail else [])] + [f"    {g}" for g in self.gaps]
        out += [f"  {x}" for x in self.also]
        return out + [f"  assumed: {a}" for a in self.assumed]


def _spec(record: dict):
    from toyspt.runs.specs import spec_from_dict

    return spec_from_dict(record["spec"])


def lockstep_group(led: Ledger, record: dict) -> list[dict]:
    """The records trained in one lockstep job with ``record`` (itself included, by seed): same
    ``group()``, the same ``seconds``."""
    spec = _spec(record)
    g, sec = spec.group(), record.get("seconds")
    if g is None or not isinstance(sec, float):
        return [record]
    mates = [r for r in (ln.record for ln in led.lines().values()) if "recipe" in r["spec"]  # each parsed once
             and r.get("seconds") == sec and r["spec"].get("seed") != record["spec"]["seed"]]
    mates = [r for r in mates if _spec(r).group() == g]
    return sorted([record, *mates], key=lambda r: r["spec"]["seed"])


def _original_groups(led: Ledger, record: dict) -> dict[str, list[dict]]:
    """{key: its lockstep group's records} for ``record`` and every recorded run it continues."""
    out = {}
    while record is not None:
        out[record["key"]] = lockstep_group(led, record)
        parent = led.lines().get(record.get("parent") or "")
        record = parent.record if parent is not None else None
    return out


def retrain(targets: list[dict], groups: dict[str, list[dict]], env: dict) -> tuple[dict[str, dict], str]:
    """({key: entry as a record keeps it} of ``targets`` and every run retrained on the way,
    the capability the child process dispatched to), in a fresh process with ``env``."""
    from toyspt.data.source import kinds

    modules = sorted({k.from_fields.__module__ for k in kinds().values()})  # the child registers the same kinds
    payload = json.dumps(dict(targets=[t["spec"] for t in targets], modules=modules,
                              groups={k: [r["spec"] for r in v] for k, v in groups.items()}))
    proc = subprocess.run([sys.executable, "-m", "toyspt.runs.verify"], input=payload, capture_output=True,
                          text=True, env={**os.environ, **env})
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"the retraining process failed (exit {proc.returncode}): {tail}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["entries"], out["capability"]


def _child() -> None:
    """The retraining process: read the specs, train them (parents first, lockstep groups as
    given), print the entries as records keep them and the capability torch dispatched to."""
    import importlib

    import torch

    from toyspt.runs.ledger import _plain
    from toyspt.runs.specs import spec_from_dict
    from toyspt.runs.sweeps import as_stored

    job = json.loads(sys.stdin.read())
    for module in job["modules"]:
        importlib.import_module(module)
    groups = {k: [spec_from_dict(d) for d in v] for k, v in job["groups"].items()}
    memo: dict = {}

    def compute(spec):
        if spec.key() in memo:
            return memo[spec.key()]
        members = groups.get(spec.key()) or [spec]
        parents = [m.parent() for m in members]
        starts = [compute(p) if p is not None else None for p in parents] if any(parents) else None
        if spec.group() is not None:
            results = type(spec).execute_group(members, starts)
        else:
            results = [spec.execute(start=starts[0] if starts else None)]
        for m, r in zip(members, results):
            memo[m.key()] = as_stored(r)
        return memo[spec.key()]

    for d in job["targets"]:
        compute(spec_from_dict(d))
    entries = {k: json.loads(json.dumps(_plain(e), allow_nan=False)) for k, e in memo.items()}
    print(json.dumps(dict(entries=entries, capability=torch.backends.cpu.get_cpu_capability())))


def _dispatch(record: dict, anyway: bool) -> tuple[dict | None, dict, list[str], str]:
    """(the environment to retrain ``record`` under or None, the kernels it asks for, what is
    assumed, why none): the recorded kernels; with ``anyway``, where this host lacks them, the
    nearest it offers (:func:`toyspt.runs.kernels.nearest`), each setting changed said."""
    here = cpu_model()
    want, assumed = kernels.recorded(record, here=here)
    if record.get("cpu") != here:
        assumed = [*assumed, OTHER_MODEL.format(cpu=record.get("cpu"), here=here)]
    env, why = kernels.environment(want) if want else (None, "the record names no kernels")
    if env is None and anyway:
        want, changed = kernels.nearest(want)
        env, other = kernels.environment(want)
        why = f"{why}; nor the nearest kernels this host has: {other}" if env is None else ""
        assumed = [*assumed, *(f"--anyway: {c}" for c in changed)]
    return env, want, assumed, why


def _said(recorded: dict, entry: dict, tol: float | None) -> str:
    """How a run retrained on the way compares with its record (``tol``: judged as --anyway does)."""
    rec = decode(recorded["entry"])
    if tol is not None:
        status, lines = judge(numbers(rec), numbers(entry, rec), tol)
        return status + (f": {lines[0]}" if lines else "")
    d = differences(numbers(rec), numbers(entry, rec))
    return "reproduced" if not d else f"differs in {len(d)} numbers"


def verify(led: Ledger, record: dict, anyway: bool = False) -> Outcome:
    """Retrain ``record``'s run under its kernels and compare (see the module docstring). With
    ``anyway``, a record whose kernels this host lacks is retrained under the nearest it has, and
    a record that is not reproduced bit for bit is judged by :func:`toyspt.runs.closeness.judge`:
    ``within tolerance`` or ``differs``, with the largest difference of each number and its epoch."""
    label = f"{record['key']}"
    if "recipe" not in record["spec"]:
        return Outcome(record["key"], f"{record['kind']} record {label}", "not verified",
                       "only training runs are retrained; this record is a "
                       f"{record['kind']} entry computed from other entries")
    label = _spec(record).label()
    env, want, assumed, why = _dispatch(record, anyway)
    if env is None:
        return Outcome(record["key"], label, "not verified", why, assumed)
    tol = tolerance(record["spec"]) if anyway else None

    def attempt(groups):
        got, cap = retrain([record], groups, env)
        if cap != want["aten_cpu_capability"]:
            raise RuntimeError(f"asked torch for {want['aten_cpu_capability']}, it dispatched to {cap}")
        also = [f"retrained on the way, {k}: {_said(led.lines()[k].record, entry, tol)}"
                for k, entry in got.items() if k != record["key"] and led.lines().get(k) is not None]
        rec = decode(record["entry"])
        return differences(numbers(rec), numbers(got[record["key"]], rec)), also, got[record["key"]]

    try:
        diff, also, got = attempt({})
        size = 1
        groups = _original_groups(led, record)
        if diff and any(len(g) > 1 for g in groups.values()):  # where the group matters: in the original groups
            diff, also, got = attempt(groups)
            size = len(groups[record["key"]])
    except RuntimeError as e:
        return Outcome(record["key"], label, "not verified", str(e), assumed)
    if not diff:
        return Outcome(record["key"], label, "reproduced", "every number bit for bit", assumed, size, also)
    if tol is not None:
        rec = decode(record["entry"])
        status, gaps = judge(numbers(rec), numbers(got, rec), tol)
        head = (f"{len(diff)} numbers not bit for bit; the tolerance, relative {tol:.3g} "
                f"(2·(n - 1)·u32, n = {terms(record['spec'])}):")
        return Outcome(record["key"], label, status, head, assumed, size, also, gaps)
    shown = "; ".join(diff[:MAX_SHOWN]) + (f"; and {len(diff) - MAX_SHOWN} more" if len(diff) > MAX_SHOWN else "")
    return Outcome(record["key"], label, "differs", f"{len(diff)} numbers differ: {shown}", assumed, size, also)


def choose(led: Ledger, sample: int | None = None, key: str | None = None, seed: int = 0) -> list[dict]:
    """The records to verify: the one of ``key``, or ``sample`` run records drawn by ``seed``."""
    import random

    lines = led.lines()
    if key is not None:
        hits = [ln.record for k, ln in lines.items() if k == key or k.startswith(key)]
        if len(hits) != 1:
            raise ValueError(f"--key {key}: {'no record' if not hits else f'{len(hits)} records'} of that key")
        return hits
    runs = sorted(k for k, ln in lines.items() if "recipe" in ln.record["spec"])  # parsed one at a time
    return [lines[k].record for k in random.Random(seed).sample(runs, min(sample or 1, len(runs)))]


if __name__ == "__main__":
    _child()

__all__ = ["Outcome", "lockstep_group", "retrain", "verify", "choose"]
