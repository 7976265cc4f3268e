"""What a sweep must train, and which stored entry answers each spec asked for.

Work is not done twice. A spec is answered by

* its own entry, or that of one of its ``alternatives()`` (the same run evaluated more often),
  cached or asked for in the same sweep;
* the run of a spec asked for in the same sweep whose ``twins()`` include it (a tracked run
  answers for its untracked twin): that run stores the twin's entry beside its own, so later
  sweeps find it in the cache as well.

A spec with a ``parent()`` continues the parent's stored end state; the parent is likewise
taken from the cache, from a twin (a tracked SPT-only run serves as the parent of the runs
that continue SPT), or trained first. A spec that only reads its parent's weights
(``reads_parent()``: a probe of a stored run) takes any entry that answers the parent. An
entry whose twin entry is missing (a run killed between storing the two) has it written from
its own: nothing is trained again. Entries are read from a store (:mod:`toyspt.runs.store`: a
run cache, or layers such as a cache before a results ledger): an asked spec may be answered by
an entry without weights (a ledger record), a parent only by one with its weights.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from toyspt.runs.specs import Entry, Spec
from toyspt.runs.store import Store


def lineage(spec: Spec) -> list[Spec]:
    """``spec``, its parent, the parent's parent, ..."""
    out = [spec]
    while (p := out[-1].parent()) is not None:
        out.append(p)
    return out


def load_answer(store: Store, spec: Spec, weights: bool = False) -> Entry | None:
    """The stored entry of ``spec`` or of one of its alternatives (``weights``: one with its weights)."""
    for s in (spec, *spec.alternatives()):
        if (hit := store.load(s, weights)) is not None:
            return hit
    return None


def store_with_twins(store: Store, spec: Spec, result: Entry) -> dict[str, Entry]:
    """Store ``result`` as ``spec``'s entry and as the entry of each of its twins; returns
    {key: entry} of the twins (as computed here, not reloaded)."""
    store.store(spec, result)
    out = {}
    for twin in spec.twins():
        out[twin.key()] = r = spec.twin_result(twin, result)
        store.store(twin, r)
    return out


def store_with_twins_only(store: Store, spec: Spec, result: Entry) -> dict[str, Entry]:
    """Store the twins' entries of ``spec``'s stored ``result`` where no entry with weights is
    stored (the repair of a run killed between storing its own entry and its twins'); {key: entry}."""
    out = {}
    for twin in spec.twins():
        out[twin.key()] = r = spec.twin_result(twin, result)
        if store.load(twin, weights=True) is None:
            store.store(twin, r)
    return out


@dataclass
class Plan:
    """The sweep of some specs, planned: ``answer`` (asked key -> the spec whose entry answers
    it), ``done`` (key -> cached entry, for answers that need no training), ``todo`` (the
    specs to train, parents first), ``makes`` (key of every entry a todo spec stores, its own
    and its twins' -> that spec), ``after`` (todo key -> the todo key whose run it continues)."""

    answer: dict[str, Spec]
    done: dict[str, Entry]
    todo: list[Spec]
    makes: dict[str, Spec] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    loaded: list[tuple[Spec, Entry]] = field(default_factory=list)  # every entry read while planning
    reads: dict[str, str] = field(default_factory=dict)  # todo key -> the entry key it reads (reads_parent)

    def children(self) -> dict[str, list[Spec]]:
        """todo key -> the todo specs that continue its run."""
        by_key = {s.key(): s for s in self.todo}
        out: dict[str, list[Spec]] = {}
        for k, p in self.after.items():
            out.setdefault(p, []).append(by_key[k])
        return out

    def producer(self, key: str) -> Spec | None:
        """The todo spec whose run stores the entry ``key`` (None: cached, or not needed)."""
        return self.makes.get(key)

    def needs(self, spec: Spec) -> list[Spec]:
        """The todo specs that must train before ``spec`` (one of the asked specs) is answered:
        the run answering it and every run that one continues, nearest first; none when its
        answer is at hand (a todo run that would store it again, a tracked twin, is not waited for)."""
        if self.answer[spec.key()].key() in self.done:
            return []
        if getattr(self, "_by_key", None) is None or len(self._by_key) != len(self.todo):
            self._by_key = {s.key(): s for s in self.todo}
        by_key = self._by_key
        out, p = [], self.producer(self.answer[spec.key()].key())
        while p is not None:
            out.append(p)
            p = by_key.get(self.after.get(p.key(), ""))
        return out


class _Planner:
    """One plan as it is made: the asked specs, the asked runs that yield twins, the entries
    read so far (``own``: an asked spec's own entry with its weights, loaded once) and the todo."""

    def __init__(self, specs: Sequence[Spec], store: Store):
        self.store = store
        unique = list({s.key(): s for s in specs}.values())
        self.asked = {s.key() for s in unique}
        self.twin_of: dict[str, Spec] = {}  # twin key -> the asked spec whose run yields it
        for s in unique:
            for t in s.twins():
                self.twin_of.setdefault(t.key(), s)
        self.answer = {s.key(): self.target(s) for s in unique}
        self.targets = list({a.key(): a for a in self.answer.values()}.values())
        self.own: dict[str, Entry | None] = {}  # asked specs' own entries, loaded once
        self.seen: dict[str, Spec] = {}
        self.todo: dict[str, Spec] = {}
        self.plan = Plan(self.answer, {}, [])

    def target(self, s: Spec) -> Spec:
        """A twin made by an asked run first, then an asked alternative, else ``s``."""
        for c in (s, *s.alternatives()):
            if c.key() in self.twin_of:
                return c
        return next((a for a in s.alternatives() if a.key() in self.asked), s)

    def drop_entries(self) -> None:
        """``recompute``: drop the entries of the answering specs, their parents and twins."""
        for s in self.targets:
            for x in lineage(self.twin_of.get(s.key(), s)):
                for y in (x, *x.alternatives(), *x.twins()):
                    self.store.remove(y)

    def cached(self, x: Spec) -> Entry | None:
        if x.key() not in self.own:
            self.own[x.key()] = self.store.load(x, weights=True)
            self.seen[x.key()] = x
        return self.own[x.key()]

    def repaired(self, x: Spec) -> Entry | None:
        """x's entry, written from its provider's when only the provider's was stored."""
        p = self.twin_of.get(x.key())
        if p is None or (hit := self.cached(p)) is None:
            return None
        made = store_with_twins_only(self.store, p, hit)
        self.own[x.key()] = made[x.key()]
        return self.own[x.key()]

    def stored_answer(self, s: Spec) -> Entry | None:
        """The stored entry answering the target ``s``. ``own`` keeps only a spec's own entry with
        its weights (what a child can continue): an alternative's entry or a ledger record answers
        the spec, never a parent."""
        r = self.cached(s)
        if r is None:  # an alternative's entry with weights (s's own was read by cached(s))
            r = next((h for a in s.alternatives() if (h := self.store.load(a, True)) is not None), None)
        if r is None and s.key() in self.twin_of:
            r = self.repaired(s)
        if r is None:  # an entry without weights (a ledger record) answers an asked spec
            r = load_answer(self.store, s)
        return r

    def available(self, p: Spec) -> bool:
        """Whether ``p``'s own entry is made by a todo spec, cached, or made now from a stored
        tracked twin's, or will be made by an asked tracked run (then put into todo)."""
        if p.key() in self.plan.makes or self.cached(p) is not None or self.repaired(p) is not None:
            return True
        if p.key() in self.twin_of:  # trained anyway (asked), and its run yields p
            self.add(self.twin_of[p.key()])
            return True
        return False

    def read(self, p: Spec) -> str | None:
        """For a child that only reads its parent's weights: the key of the entry answering
        ``p`` it will read (``p``'s, an alternative's, a twin's), put into todo if it must be
        trained and is asked for anyway; None when none is at hand or asked."""
        for c in (p, *p.alternatives()):
            if self.available(c):
                return c.key()
        for c in (p, *p.alternatives()):
            if c.key() in self.asked:
                self.add(c)
                return c.key()
        return None

    def add(self, s: Spec) -> None:
        """Put ``s`` (not cached) and the part of its lineage that is neither cached nor made
        by a todo spec into todo, parents first."""
        chain = [s]
        while (p := chain[-1].parent()) is not None:
            if chain[-1].reads_parent():
                k = self.read(p)
                if k is not None:
                    self.plan.reads[chain[-1].key()] = k
                    break
                self.plan.reads[chain[-1].key()] = p.key()
            elif self.available(p):
                break
            chain.append(p)
        for x in reversed(chain):
            if x.key() in self.todo:
                continue
            self.todo[x.key()] = x
            for y in (x, *x.twins()):
                self.plan.makes.setdefault(y.key(), x)

    def finish(self) -> Plan:
        """The plan: its todo, the entries read, which todo run each continues."""
        plan, done = self.plan, self.plan.done
        plan.todo = list(self.todo.values())
        plan.loaded = [(x, r) for x in {**{s.key(): s for s in self.targets}, **self.seen}.values()
                       if (r := self.own.get(x.key()) or done.get(x.key())) is not None]
        for s in plan.todo:
            p = s.parent()
            k = plan.reads.get(s.key(), p.key() if p is not None else None)
            if k is not None and k in plan.makes:
                plan.after[s.key()] = plan.makes[k].key()
        return plan


def make_plan(specs: Sequence[Spec], store: Store, recompute: bool = False) -> Plan:
    """Plan a sweep of ``specs`` (see the module docstring) on ``store``; ``recompute`` drops the
    entries of the answering specs, their parents and twins first."""
    planner = _Planner(specs, store)
    if recompute:
        planner.drop_entries()
    done = planner.plan.done
    for s in planner.targets:
        if (r := planner.stored_answer(s)) is not None:
            done[s.key()] = r
    for s in planner.targets:
        if s.key() not in done:
            planner.add(planner.twin_of.get(s.key(), s))
    return planner.finish()


__all__ = ["Plan", "make_plan", "lineage", "load_answer", "store_with_twins", "store_with_twins_only"]
