import concurrent.futures as cf
import json
from dataclasses import replace

import pytest
import torch
from conftest import SMALL_TASK

from toyspt.runs import CacheError, RunCache, RunSpec, get_run, spec_from_dict, sweep, with_overrides
from toyspt.runs.arms import arm_spec, default_swap
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.recipes import TrainConfig

BASE = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=1, pre_epochs=1, batch_size=64))


@pytest.fixture
def counted(monkeypatch):
    """Count the runs that really train."""
    calls = []
    real = RunSpec.execute

    def spy(spec, progress=False):
        calls.append(spec.key())
        return real(spec, progress)

    monkeypatch.setattr(RunSpec, "execute", spy)
    return calls


def test_key_is_stable_and_sensitive():
    assert BASE.key() == RunSpec("scratch", 0, SMALL_TASK, train=BASE.train).key()
    assert BASE.key() != replace(BASE, seed=1).key()
    assert BASE.key() != with_overrides(BASE, model__pos="alibi").key()
    assert spec_from_dict(json.loads(json.dumps(BASE.to_dict()))) == BASE


def test_second_call_trains_nothing(tmp_path, counted):
    cache = RunCache(tmp_path)
    a = get_run(BASE, cache)
    b = get_run(BASE, cache)
    assert len(counted) == 1
    assert a.history == b.history and a.summary == b.summary
    assert a.seconds > 0 and b.seconds == a.seconds  # timed as a sweep times its runs, and stored
    for k, v in a.states["final"].items():
        assert torch.equal(v, b.states["final"][k])


def test_corrupted_entry_is_recomputed(tmp_path, counted):
    cache = RunCache(tmp_path)
    get_run(BASE, cache)
    path = cache.path(BASE)
    with open(path / "weights.pt", "r+b") as f:  # flip bytes in the middle of the weights
        f.seek(100)
        f.write(b"\x00garbage\x00")
    assert cache.load(BASE) is None and not path.exists()
    aside = tmp_path / ".damaged" / f"{BASE.key()}-0"  # set aside with its reason, never deleted
    assert (aside / "weights.pt").exists() and "weights.pt" in aside.with_name(aside.name + ".why").read_text()
    get_run(BASE, cache)
    assert len(counted) == 2 and cache.load(BASE) is not None
    (cache.path(BASE) / "result.json").unlink()  # a missing file counts as damage too
    assert cache.load(BASE) is None


def test_ctrl_c_while_an_entry_is_read_leaves_the_entry_in_place(tmp_path, counted, monkeypatch, capsys):
    """Ctrl-C falling inside torch's reads of ``weights.pt`` once came out of torch as another
    error: the good entry was set aside as damaged and the sweep died with "missing from the
    cache after training" instead of exiting 130."""
    import os
    import signal

    from toyspt.util import zipdir

    cache = RunCache(tmp_path)
    get_run(BASE, cache)
    before = _entries(tmp_path)
    read = zipdir.Archive.readinto
    calls = []

    def interrupted(self, b):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return read(self, b)

    monkeypatch.setattr(zipdir.Archive, "readinto", interrupted)
    capsys.readouterr()
    with pytest.raises(KeyboardInterrupt):
        cache.load(BASE)
    assert _entries(tmp_path) == before and "damaged" not in capsys.readouterr().err
    monkeypatch.undo()
    assert cache.load(BASE) is not None and len(counted) == 1


def test_killed_sweep_resumes_without_redoing_finished_runs(tmp_path, counted, monkeypatch):
    cache = RunCache(tmp_path)
    specs = [replace(BASE, seed=s) for s in range(3)]
    real = RunSpec.execute

    def dies_on_third(spec, progress=False):
        if spec.seed == 2:
            raise KeyboardInterrupt  # the process is killed half way through the sweep
        return real(spec, progress)

    monkeypatch.setattr(RunSpec, "execute", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        sweep(specs, cache, options=SweepOptions(progress=False))
    assert [cache.has(s) for s in specs] == [True, True, False]
    assert not list(tmp_path.rglob(".tmp-*"))  # nothing half-written stays
    monkeypatch.setattr(RunSpec, "execute", real)
    counted.clear()
    calls = []
    monkeypatch.setattr(RunSpec, "execute", lambda spec, progress=False: calls.append(spec.seed) or real(spec))
    out = sweep(specs, cache, options=SweepOptions(progress=False))
    assert calls == [2] and [r.seed for r in out] == [0, 1, 2]


def test_sweep_through_a_process_pool(tmp_path):
    cache = RunCache(tmp_path)
    specs = [replace(BASE, seed=s) for s in range(2)]
    with cf.ProcessPoolExecutor(2) as ex:
        out = sweep(specs, cache, options=SweepOptions(executor=ex, progress=False))
    inline = get_run(specs[1], RunCache(tmp_path / "other"))
    assert out[1].history == inline.history  # same seed, same numbers in another process


def test_arm_parsing():
    s = arm_spec("scratch:pos=alibi,train.lr=0.01", BASE)
    assert s.recipe == "scratch" and s.model.pos == "alibi" and s.train.lr == 0.01
    assert arm_spec("alibi", BASE).model.pos == "alibi"
    d = arm_spec("data_swap", BASE)
    assert d.swap == default_swap(BASE.data) and d.swap.family == "freq_band"
    assert arm_spec("data_swap:swap.seed=42", BASE).swap.seed == 42
    assert arm_spec("spt:band0=1/2", BASE).data.band0 == (1, 2)
    with pytest.raises(ValueError, match="unknown recipe"):
        arm_spec("pretrain", BASE)
    with pytest.raises(ValueError, match="cannot place"):
        arm_spec("scratch:nonsense=1", BASE)
    with pytest.raises(ValueError, match="key=value"):
        arm_spec("scratch:pos", BASE)
    with pytest.raises(ValueError, match="swap"):
        arm_spec("spt:swap.seed=1", BASE)


class _Payload:
    """Pickles as a call of os.system: what a swapped-in weights.pt could ask for."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


def _reseal(cache, spec):
    """Recompute the entry's manifest with the cache's own key (as a holder of the key could)."""
    from toyspt.runs.cache_files import FILES, _mac, _sha256
    d = cache.path(spec)
    manifest = {n: _mac(cache.secret(), spec.key(), n, _sha256(d / n)) for n in FILES}
    (d / "manifest.json").write_text(json.dumps(manifest))


def _one_drop_line(capsys, *needles):
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "run cache" in ln]
    assert len(lines) == 1 and "damaged entry" in lines[0] and "set aside in" in lines[0], lines
    assert all(n in lines[0] for n in needles), lines[0]


def test_code_running_weights_are_refused_not_run(tmp_path, capsys):
    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    capsys.readouterr()
    marker = tmp_path / "ran"
    torch.save({"final": _Payload(marker)}, cache.path(BASE) / "weights.pt")
    _reseal(cache, BASE)
    assert cache.load(BASE) is None and not cache.path(BASE).exists()
    assert not marker.exists()  # nothing from the file ran
    _one_drop_line(capsys, "weights.pt", "refused", "system")


def test_unkeyed_manifest_does_not_validate(tmp_path, capsys):
    import hashlib
    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    capsys.readouterr()
    d = cache.path(BASE)
    plain = {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in ("spec.json", "result.json", "weights.pt")}
    (d / "manifest.json").write_text(json.dumps(plain))  # recomputed by someone without the key
    assert cache.load(BASE) is None
    _one_drop_line(capsys, "keyed digest")


def test_result_of_another_seed_is_damage(tmp_path, capsys):
    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    get_run(replace(BASE, seed=1), cache)
    capsys.readouterr()
    src = cache.path(replace(BASE, seed=1)) / "result.json"
    (cache.path(BASE) / "result.json").write_text(src.read_text())  # seed 1's result under seed 0
    _reseal(cache, BASE)
    assert cache.load(BASE) is None
    _one_drop_line(capsys, "result.json says seed 1 but its spec says 0")


def test_key_file_is_private_and_stable(tmp_path):
    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    key = tmp_path / "c" / ".key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert RunCache(tmp_path / "c").load(BASE) is not None  # a second handle reads the same key


# ------------------------------------------------------- the key, and what is never deleted

def _entries(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("kind,words", [
    ("fifo", "is a FIFO"), ("dev_zero", "is a character device"), ("huge", "over the limit of 128"),
    ("folder", "is a directory"), ("not_hex", "expected 64 hex digits"), ("short", "expected 64 hex digits"),
])
def test_a_bad_key_file_is_refused_unread_and_nothing_is_set_aside(tmp_path, kind, words):
    import os
    import time

    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    key = tmp_path / "c" / ".key"
    key.unlink()
    if kind == "fifo":
        os.mkfifo(key)  # reading it would block forever
    elif kind == "dev_zero":
        os.symlink("/dev/zero", key)  # reading it would never end
    elif kind == "huge":
        with open(key, "wb") as f:
            f.truncate(32 << 30)  # sparse: 32 GB that a read would allocate
    elif kind == "folder":
        key.mkdir()
    else:
        key.write_text("z" * 64 if kind == "not_hex" else "ab" * 31)
    before = _entries(tmp_path / "c")
    t = time.perf_counter()
    with pytest.raises(CacheError) as e:
        RunCache(tmp_path / "c").load(BASE)
    assert time.perf_counter() - t < 1.0
    msg = str(e.value)
    assert words in msg and ".key" in msg and "\n" not in msg and "cache entry" not in msg, msg
    assert _entries(tmp_path / "c") == before and not (tmp_path / "c" / ".damaged").exists()


def test_a_cache_copied_without_its_key_is_refused_and_nothing_retrained(tmp_path, counted, capsys):
    import shutil

    from toyspt.cli.main import main

    src = tmp_path / "c"
    for s in (BASE, replace(BASE, seed=1)):
        get_run(s, RunCache(src))
    copy = tmp_path / "c2"
    copy.mkdir()
    for child in src.iterdir():  # what `cp -r c/* c2/` does: the glob skips the hidden .key
        if not child.name.startswith("."):
            shutil.copytree(child, copy / child.name)
    before, trained = _entries(copy), len(counted)
    for spec in (BASE, replace(BASE, seed=2)):  # a stored run and one that would train
        with pytest.raises(CacheError, match="holds runs but no key file .*cp SRC/.key"):
            get_run(spec, RunCache(copy))
    with pytest.raises(CacheError, match="no key file"):
        sweep([replace(BASE, seed=3)], RunCache(copy), options=SweepOptions(progress=False))
    assert main(["train", "--recipe", "scratch", "--cache", str(copy), "--train.epochs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: run cache") and "no key file" in err[0], err
    assert _entries(copy) == before and len(counted) == trained  # nothing deleted, nothing trained
    shutil.copy(src / ".key", copy / ".key")  # restored as the message says: every run is there
    assert all(RunCache(copy).load(replace(BASE, seed=s)) is not None for s in (0, 1))


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "huge"])
def test_an_entry_file_that_is_not_a_small_regular_file_is_set_aside_unread(tmp_path, kind, capsys):
    import os
    import time

    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    capsys.readouterr()
    name = {"fifo": "manifest.json", "dev_zero": "weights.pt", "huge": "weights.pt"}[kind]
    target = cache.path(BASE) / name
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev_zero":
        os.symlink("/dev/zero", target)
    else:
        with open(target, "wb") as f:
            f.truncate(32 << 30)
    t = time.perf_counter()
    assert cache.load(BASE) is None
    assert time.perf_counter() - t < 1.0
    words = {"fifo": "not a regular file", "dev_zero": "symbolic link", "huge": "over the limit"}[kind]
    _one_drop_line(capsys, name, words)
    assert os.path.lexists(tmp_path / "c" / ".damaged" / f"{BASE.key()}-0" / name)


# ------------------------------------------------------- round 5: set-aside, temp names, key case

@pytest.mark.parametrize("kind", ["file", "loop"])
def test_a_failed_set_aside_is_named_and_never_costs_the_run(tmp_path, counted, capsys, kind):
    import os

    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    with open(cache.path(BASE) / "weights.pt", "r+b") as f:
        f.seek(100)
        f.write(b"\x00garbage\x00")
    aside = tmp_path / "c" / ".damaged"
    if kind == "file":
        aside.write_text("not a folder")
    else:
        os.symlink(aside, aside)  # a symbolic link loop
    capsys.readouterr()
    get_run(BASE, cache)  # once: trained, then "could not place cache entry", nothing stored
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "run cache" in ln]
    assert any("cannot set aside damaged entry" in ln and ".damaged" in ln for ln in lines), lines
    assert len(counted) == 2 and cache.load(BASE) is not None  # stored: the next call trains nothing
    get_run(BASE, cache)
    assert len(counted) == 2
    beside = cache.path(BASE).parent / f".damaged-{BASE.key()}-0"  # kept, with its reason
    assert (beside / "weights.pt").exists() and "weights.pt" in beside.with_name(beside.name + ".why").read_text()


def test_temporary_names_that_do_not_parse_or_belong_elsewhere_are_left_to_age(tmp_path):
    import os
    import socket
    import subprocess
    import sys

    import toyspt.runs.cache_files as cache_mod

    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    folder = cache.path(BASE).parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname().replace("-", "_")
    stray = [folder / f".tmp-{host}-{'9' * 20}-x",  # once: OverflowError, the run lost
             folder / f".tmp-{cache_mod._writer_space()}-{'9' * 20}-x",
             folder / f".tmp-{cache_mod._writer_space()}-\u0661\u0662-x"]
    # a live writer in another PID namespace on this host: its pid means nothing here
    other = [folder / f".tmp-{host}_0123456789ab-{dead.pid}-y", folder / f".tmp-{host}-{dead.pid}-y"]
    for d in stray + other:
        d.mkdir()
    cache.store(BASE, cache.load(BASE))
    assert all(d.exists() for d in stray + other)
    t = os.path.getmtime(folder) - cache_mod.STALE_TMP_SECONDS - 10
    for d in stray + other:
        os.utime(d, (t, t))
    cache.store(BASE, cache.load(BASE))
    assert not any(d.exists() for d in stray + other)  # age alone removes them


def test_the_key_file_in_upper_case_is_the_same_key(tmp_path, counted, capsys):
    cache = RunCache(tmp_path / "c")
    get_run(BASE, cache)
    key = tmp_path / "c" / ".key"
    key.write_text(key.read_text().upper())  # once: every entry set aside and retrained
    assert RunCache(tmp_path / "c").load(BASE) is not None
    assert len(counted) == 1 and "damaged" not in capsys.readouterr().err
    assert not (tmp_path / "c" / ".damaged").exists()
