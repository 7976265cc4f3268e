"""How much of the LRA study its ledger records, and what the rest costs by the seconds measured
(docs/reports/lra.md, "Status"): ``toyspt study progress lra [--ledger PATH] [--json OUT]``.

Every entry the study trains (its runs, :meth:`toyspt.studies.lra_design.Study.specs`, and the SPT-only
runs they continue) belongs to a group, ``task/arm`` (a parent: ``task/spt_only``,
``task/depth2_spt_only``, ``task/spt_only_mask50``). Per group: entries planned and recorded, and
the CPU-seconds of the recorded ones (a continued run's own phases only, as the ledger keeps
them). The remaining cost is the mean measured seconds of each group times its entries not yet
recorded; a group with nothing measured is counted apart (``unmeasured_entries``), never guessed.
The tracked twins of the mechanism (``twins``) are counted apart, with a lower bound on their cost.
"""
from __future__ import annotations

from collections import Counter


def _group(study, task: str, spec) -> str:
    if task not in study.tasks:  # a task of the second study alone
        return f"{task}/{spec.recipe}"
    depth = f"depth{spec.model.n_layers}_" if spec.model.n_layers > 1 else ""
    mask = spec.train.mask_rate
    mask_tag = "" if mask == study.tasks[task].train.mask_rate else f"_mask{round(mask * 100)}"
    return f"{task}/{depth}{spec.recipe}{mask_tag}"


def entries(study, specs: dict | None = None) -> dict[str, tuple[str, object]]:
    """key -> (group, spec) of every entry the study trains, runs and their SPT-only parents
    (``specs``: ``(task, arm, seed)`` -> spec, default the first study's)."""
    specs = study.specs() if specs is None else specs
    out: dict[str, tuple[str, object]] = {}
    for (task, arm, _), spec in specs.items():
        out[spec.key()] = (f"{task}/{arm}", spec)
    for (task, _, _), spec in specs.items():
        parent = spec.parent()
        if parent is not None and parent.key() not in out:
            out[parent.key()] = (_group(study, task, parent), parent)
    return out


def _tally(found: dict, lines: dict) -> tuple[dict, dict, float, int]:
    """Per group of ``found`` (:func:`entries`): planned, recorded, their seconds and mean; per seed
    whether each entry is recorded; the remaining seconds by the groups' means; entries of groups
    with nothing measured."""
    groups: dict[str, dict] = {}
    seeds: dict[int, list[bool]] = {}
    for key, (group, spec) in found.items():
        g = groups.setdefault(group, dict(planned=0, recorded=0, cpu_seconds=0.0))
        g["planned"] += 1
        line = next((lines[s.key()] for s in (spec, *spec.alternatives()) if s.key() in lines), None)
        seeds.setdefault(spec.seed, []).append(line is not None)
        if line is not None:
            g["recorded"] += 1
            g["cpu_seconds"] += float(line.record.get("seconds") or 0.0)
    left = unmeasured = 0
    for g in groups.values():
        g["mean_seconds"] = g["cpu_seconds"] / g["recorded"] if g["recorded"] else None
        missing = g["planned"] - g["recorded"]
        if missing and g["mean_seconds"] is None:
            unmeasured += missing
        elif missing:
            left += missing * g["mean_seconds"]
    return groups, seeds, left, unmeasured


def _counts(runs: set, lines: dict, groups: dict, seeds: dict, left: float, unmeasured: int) -> dict:
    total = sum(g["cpu_seconds"] for g in groups.values())
    return dict(runs=len(runs), recorded_runs=sum(1 for k in runs if k in lines),
                entries=sum(g["planned"] for g in groups.values()),
                recorded=sum(g["recorded"] for g in groups.values()),
                cpu_seconds=total, cpu_hours=total / 3600, whole_seeds=sorted(s for s, v in seeds.items() if all(v)),
                n_whole_seeds=sum(all(v) for v in seeds.values()), remaining_cpu_hours=left / 3600,
                unmeasured_entries=unmeasured)


def progress(ledger, study) -> dict:
    """The progress of ``study`` (a :class:`toyspt.studies.lra_design.Study`) in ``ledger`` (a
    :class:`toyspt.runs.ledger.Ledger`): totals, hosts (the records' ``cpu``; ``records_by_host``:
    how many records each wrote), whole seeds and per group planned / recorded / seconds, and the
    remaining cost; ``second``: the same counts of the second study (its runs in the same ledger)."""
    lines = ledger.lines()
    groups, seeds, left, unmeasured = _tally(entries(study), lines)
    twins = _twins(study, lines, groups)
    by_host = Counter(str(line.record.get("cpu")) for line in lines.values())
    two = study.second()
    tally = _tally(entries(study, two), lines)
    second = dict(_counts({s.key() for s in two.values()}, lines, *tally), twins=_twins(study, lines, tally[0], 2))
    return dict(ledger=str(ledger.path), **_counts({spec.key() for spec in study.specs().values()}, lines, groups,
                                                   seeds, left, unmeasured),
                hosts=sorted(by_host), records_by_host=dict(sorted(by_host.items())),
                groups=groups, twins=twins, second=second)


def _twins(study, lines: dict, groups: dict, which: int = 1) -> dict:
    """The tracked twins of study 1 or 2 (:meth:`toyspt.studies.lra_design.Study.mechanism`): planned,
    recorded, their CPU-hours, and a lower bound on what the rest costs: the untracked run's and its
    SPT-only parent's mean seconds (``groups``: that study's tally; a twin trains both, with trackers
    that add to them)."""
    recorded, seconds, floor, unmeasured = 0, 0.0, 0.0, 0
    twins, untracked = study.mechanism(which), study.specs() if which == 1 else study.second()
    for (task, arm, seed), spec in twins.items():
        line = lines.get(spec.key())
        if line is not None:
            recorded += 1
            seconds += float(line.record.get("seconds") or 0.0)
            continue
        run = untracked.get((task, arm, seed))  # None: a cause arm's twin (CAUSE_ARMS), of no study run
        parent = None if run is None else run.parent()
        means = [groups.get(f"{task}/{arm}", {}).get("mean_seconds")]
        means += [] if parent is None else [groups.get(_group(study, task, parent), {}).get("mean_seconds")]
        if any(m is None for m in means):
            unmeasured += 1
        else:
            floor += sum(means)
    return dict(planned=len(twins), recorded=recorded, cpu_hours=seconds / 3600,
                remaining_cpu_hours_at_least=floor / 3600, unmeasured=unmeasured)


def summary(out: dict) -> str:
    """The progress :func:`progress` returns, in one sentence."""
    return (f"{out['recorded_runs']} of {out['runs']} runs recorded ({out['recorded']} of {out['entries']} entries, "
            f"SPT-only parents included), {out['cpu_hours']:.2f} CPU-hours; whole seeds {out['whole_seeds']}; "
            f"about {out['remaining_cpu_hours']:.1f} CPU-hours left by the measured seconds"
            f" (+{out['unmeasured_entries']} entries not measured yet); tracked twins {out['twins']['recorded']} of "
            f"{out['twins']['planned']}, at least {out['twins']['remaining_cpu_hours_at_least']:.1f} CPU-hours left"
            + ("" if "second" not in out else
               f"; the second study: {out['second']['recorded_runs']} of {out['second']['runs']} runs "
               f"({out['second']['recorded']} of {out['second']['entries']} entries), "
               f"{out['second']['cpu_hours']:.2f} CPU-hours, whole seeds {out['second']['whole_seeds']}, about "
               f"{out['second']['remaining_cpu_hours']:.1f} CPU-hours left; its tracked twins "
               f"{out['second']['twins']['recorded']} of {out['second']['twins']['planned']}, at least "
               f"{out['second']['twins']['remaining_cpu_hours_at_least']:.1f} CPU-hours left"))


__all__ = ["entries", "progress", "summary"]
