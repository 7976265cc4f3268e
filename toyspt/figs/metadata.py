"""``metadata.json`` beside the figures: what made them (git revision, torch, the machine,
seeds, quick or not, tier, workers: the last call's) and, per figure, the facts its ``draw``
noted, the seconds drawing it took, when it was written and by which call (``call``: revision,
seeds, tier, ...), the runs trained for it and, of its entries answered by results-ledger
records, how many per ``cpu_capability`` of those records (``from_ledger``).

The file is rewritten (atomically) after every figure, so a job stopped by Ctrl-C or killed
leaves metadata that lists exactly the figures written so far; ``last_run`` is written when the
job ends (``interrupted`` when it was stopped). Quick and full metadata never mix.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from toyspt.util.atomic import write_text
from toyspt.util.files import UnsafeFile, read_json_object

ROOT = Path(__file__).resolve().parent.parent.parent  # the checkout (for the git revision)


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=ROOT, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=ROOT).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_info() -> dict:
    """What decides bitwise identity of the runs: CPU model and vector flags, the torch build
    (BLAS, oneDNN, compiler flags), thread counts."""
    cpu, flags = platform.processor() or "unknown", []
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
        all_flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
        flags = sorted(f for f in all_flags if f.startswith(("avx", "amx", "fma", "sse4", "f16c")))
    except OSError:
        pass
    return dict(machine=platform.machine(), cpu=cpu, cpu_vector_flags=flags,
                cpu_capability=torch.backends.cpu.get_cpu_capability(), torch_build=torch.__config__.show(),
                torch_parallel=torch.__config__.parallel_info(), mkldnn=torch.backends.mkldnn.is_available(),
                training_threads=1, numpy=__import__("numpy").__version__)


def peak_memory_mb() -> dict[str, float]:
    """Peak resident memory of this process and of the largest finished worker process."""
    import resource

    kb = 1024.0  # ru_maxrss is in kilobytes on Linux
    return dict(peak_rss_mb_main=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / kb, 1),
                peak_rss_mb_worker=round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / kb, 1))


def _lineage_keys(spec) -> Iterable[str]:
    x = spec
    while x is not None:
        for y in (x, *x.alternatives()):
            yield y.key()
        x = x.parent()


def owners(planned: dict[str, list], needs: Callable[[Any], Iterable[str]] = _lineage_keys) -> dict[str, str]:
    """Run key -> the first figure that needs it (``planned``: each figure's label and specs, in
    drawing order; ``needs(spec)``: the keys of the runs a spec waits for; by default the spec,
    its alternatives, its parent and theirs)."""
    owner: dict[str, str] = {}
    for label, specs in planned.items():
        for s in specs:
            for key in needs(s):
                owner.setdefault(key, label)
    return owner


def compute_by_figure(planned: dict[str, list], trained: dict[str, float],
                      needs: Callable[[Any], Iterable[str]] = _lineage_keys,
                      owner: dict[str, str] | None = None) -> dict[str, dict]:
    """The runs this call trained, and their training seconds, per figure: each run counts for
    the first figure that needs it (:func:`owners`, or ``owner`` when computed already)."""
    owner = owner if owner is not None else owners(planned, needs)
    out: dict[str, dict] = {}
    for key, sec in trained.items():
        d = out.setdefault(owner.get(key, "?"), dict(runs_trained=0, run_seconds=0.0))
        d["runs_trained"] += 1
        d["run_seconds"] += sec or 0.0
    for d in out.values():
        d["run_seconds"] = round(d["run_seconds"], 1)  # rounded once: each figure's sum is within 0.05 s
    return out


def from_ledger(specs: Iterable, plan, store) -> dict[str, int]:
    """How many of a figure's entries (its ``specs``, planned by ``plan`` on ``store``) were
    answered by ledger records, per the records' ``cpu_capability`` (the store's ``provenance``):
    the kernels that made those numbers, which may not be this host's (``written_on``)."""
    answers = {plan.answer[s.key()].key(): plan.answer[s.key()] for s in specs}
    made = (store.provenance(a) for k, a in answers.items() if k in plan.done)
    return dict(sorted(Counter(m for m in made if m is not None).items()))


MAX_METADATA_BYTES = 64 << 20  # a metadata.json of every figure and contrast is ~0.1 MB


def read_metadata(path: Path) -> dict:
    """The ``metadata.json`` already under ``--out`` ({} when there is none), read bounded
    (:func:`toyspt.util.files.read_json_object`): a FIFO, a device, a folder, a huge file, a
    merge conflict or JSON that is not an object is refused in one line naming it, before
    anything trains, never overwritten unread."""
    if not os.path.lexists(path):
        return {}
    try:
        return read_json_object(path, "figures' metadata file (metadata.json)", MAX_METADATA_BYTES)
    except UnsafeFile as e:
        raise UnsafeFile(f"{e}; it is rewritten after every figure: move it away or choose another --out") from None


class Metadata:
    """``out/metadata.json`` for one call of the job: ``settings`` (what the call was asked),
    then :meth:`figure` after each figure and :meth:`finish` at the end (each writes the file)."""

    def __init__(self, out: Path, quick: bool, settings: dict[str, Any], contrast: str | None = None):
        self.path = out / "metadata.json"
        meta = read_metadata(self.path)
        if meta.get("quick", quick) != quick:
            meta = {}  # never mix quick and full metadata
        meta.update(git_revision=git_revision(), torch=torch.__version__, python=platform.python_version(),
                    device="cpu", threads=torch.get_num_threads(), quick=quick, **settings)
        meta.setdefault("figures", {})
        if contrast is not None:
            meta.setdefault("contrast", dict(regime=contrast, out=contrast, figures={}))
        meta["reproducibility"] = machine_info()
        self.meta = meta
        # the top level is the last call's; each figure keeps the call that drew it (a folder's
        # figures may come from calls of different tiers, seeds and revisions)
        self.call = dict(git_revision=meta["git_revision"], torch=meta["torch"], **settings)

    def figure(self, label: str, facts: dict[str, Any]) -> None:
        """Record one written figure (``label``: its name, or ``<regime>/<name>`` in the contrast)."""
        regime, _, name = label.rpartition("/")
        where = self.meta["contrast"]["figures"] if regime else self.meta["figures"]
        # the machine a figure was written on: the kernels torch dispatches to (cpu_capability)
        # decide the runs' bits, and figures of one folder may come from different machines
        where[name] = {**facts, "written_on": dict(cpu=self.meta["reproducibility"]["cpu"],
                                                   cpu_capability=self.meta["reproducibility"]["cpu_capability"]),
                       "call": self.call}
        self.write()

    def drawn(self) -> dict[str, dict]:
        """label -> facts of every figure recorded so far (the contrast's as ``<regime>/<name>``)."""
        c = self.meta.get("contrast", {})
        return {**self.meta["figures"], **{f"{c['regime']}/{k}": v for k, v in c.get("figures", {}).items()}}

    def finish(self, last_run: dict[str, Any]) -> None:
        self.meta["last_run"] = dict(last_run, **peak_memory_mb())
        self.write()

    def write(self) -> None:
        write_text(self.path, json.dumps(self.meta, indent=1))


__all__ = ["Metadata", "read_metadata", "MAX_METADATA_BYTES",
           "git_revision", "machine_info", "peak_memory_mb", "owners", "compute_by_figure", "from_ledger"]
