"""Fault injection for the run system and the front doors: each case here used to be
accepted silently, "repaired" by deleting, or to end in a traceback."""
import errno
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SMALL_TASK

from toyspt.cli.flags import run_main
from toyspt.cli.main import main
from toyspt.runs import CacheError, RunCache, RunSpec, get_run, sweep
from toyspt.runs.cache import STALE_TMP_SECONDS
from toyspt.runs.sweeps import SweepOptions
from toyspt.train.recipes import TrainConfig

BASE = RunSpec("scratch", 0, SMALL_TASK, train=TrainConfig(epochs=1, pre_epochs=1, batch_size=64))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cached(tmp_path):
    cache = RunCache(tmp_path / "cache")
    get_run(BASE, cache)
    return cache


def test_empty_manifest_is_damage(cached):
    (cached.path(BASE) / "manifest.json").write_text("{}")  # used to be accepted, nothing checked
    assert cached.load(BASE) is None and not cached.path(BASE).exists()


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' + "7" * 5000 + "}"], ids=["deep", "digits"])
def test_a_manifest_nested_too_deep_or_with_a_huge_number_is_damage(cached, text):
    (cached.path(BASE) / "manifest.json").write_text(text)  # used to end in RecursionError / ValueError
    assert cached.load(BASE) is None and not cached.path(BASE).exists()


def test_partial_manifest_is_damage(cached):
    m = cached.path(BASE) / "manifest.json"
    blob = json.loads(m.read_text())
    del blob["result.json"]  # result.json could then be edited unseen
    m.write_text(json.dumps(blob))
    assert cached.load(BASE) is None


def test_entry_copied_under_another_key_is_damage(cached):
    other = replace(BASE, seed=1)
    shutil.copytree(cached.path(BASE), cached.path(other))  # a sound entry, but of another run
    assert cached.load(other) is None and not cached.path(other).exists()
    assert cached.load(BASE) is not None


def test_unreadable_entry_is_reported_not_deleted(cached, monkeypatch):
    import toyspt.runs.cache as cache_mod

    def denied(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache_mod, "_sha256", denied)
    with pytest.raises(CacheError, match="Permission denied"):
        cached.load(BASE)
    monkeypatch.undo()
    assert cached.load(BASE) is not None  # still there


def test_symlinked_entry_is_dropped_as_damage_not_followed(cached, tmp_path):
    other = replace(BASE, seed=2)
    target = tmp_path / "elsewhere"
    shutil.copytree(cached.path(BASE), target)
    cached.path(other).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, cached.path(other))
    assert cached.load(other) is None
    assert not cached.path(other).is_symlink() and target.exists()  # the link goes, its target stays


def test_unusable_or_read_only_cache_is_refused_before_training(tmp_path, monkeypatch):
    import toyspt.runs.cache as cache_mod

    calls = []
    monkeypatch.setattr(RunSpec, "execute", lambda self, progress=False: calls.append(1))
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CacheError, match="Not a directory"):  # a cache path under a file
        sweep([BASE], RunCache(blocker / "cache"), options=SweepOptions(progress=False))

    class ReadOnly:  # what a read-only mount answers (root ignores chmod, so simulate it)
        def __init__(self, *a, **k):
            raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr(cache_mod.tempfile, "TemporaryDirectory", ReadOnly)
    with pytest.raises(CacheError, match="not writable: Read-only file system"):
        sweep([BASE], RunCache(tmp_path / "ro"), options=SweepOptions(progress=False))
    assert calls == []  # nothing trained before the refusal


def test_stale_temporary_entries_are_swept(cached):
    import toyspt.runs.cache as cache_mod

    folder = cached.path(BASE).parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a writer that was killed: its pid no longer runs
    killed = folder / f"{cache_mod._tmp_prefix().replace(str(os.getpid()), str(dead.pid))}x"
    old, live, foreign = folder / ".tmp-stale", folder / f"{cache_mod._tmp_prefix()}y", folder / ".tmp-otherhost-1-z"
    for d in (killed, old, live, foreign):
        d.mkdir()
    t = time.time() - STALE_TMP_SECONDS - 10
    os.utime(old, (t, t))
    cached.store(BASE, cached.load(BASE))
    assert not killed.exists() and not old.exists()  # the killed writer's at once, any after an hour
    assert live.exists() and foreign.exists()  # a live writer here, a recent one elsewhere


@pytest.mark.parametrize("argv,message", [
    (["--workers", "0"], "--workers: must be >= 1"),
    (["--only", ","], "--only: no figure named"),
    (["--only", "nope"], "unknown figure"),
    (["--seeds", "4-0"], "empty range 4-0"),
    (["--only", "task", "--ledger", str(ROOT)], f"--ledger: {ROOT} must be a file to write, but it is a folder"),
    (["--only", "task", "--ledger", str(ROOT / "README.md" / "l.jsonl")], "README.md is a file, not a folder"),
])
def test_paper_figs_usage_errors_are_one_line(tmp_path, capsys, argv, message):
    from toyspt.cli.figs import main as figs_main

    assert figs_main([*argv, "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any(message in line for line in err), err
    assert not (tmp_path / "out").exists()


def test_warm_paper_figs_does_not_connect_to_dask(tmp_path, capsys):
    from toyspt.cli.figs import main as figs_main

    argv = ["--quick", "--only", "task", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]
    assert figs_main(argv) == 0  # the task figure needs no training
    assert figs_main(argv + ["--dask", "tcp://127.0.0.1:9"]) == 0  # nothing to train: never connects


def test_ctrl_c_is_one_line(capsys):
    def interrupted():
        raise KeyboardInterrupt

    assert run_main(interrupted) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_config_error_and_usage_error_share_one_exit_code(tmp_path, capsys):
    assert main(["train", "--cache", str(tmp_path), "--model.n_classes", "1"]) == 2
    assert main(["compare", "--arms", "nonsense", "--cache", str(tmp_path)]) == 2
    assert main(["train", "--no-such-flag"]) == 2


def test_pool_workers_end_with_their_parent(tmp_path):
    """kill -9 of the parent: its process-pool workers exit within seconds."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from toyspt.runs.executors import process_pool
        ex = process_pool(2)
        futs = [ex.submit(time.sleep, 60) for _ in range(2)]
        time.sleep(1.5)
        print(" ".join(str(p) for p in ex._processes), flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.time() + 5
    alive = pids
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = [p for p in pids if _alive(p)]
    assert not alive, f"workers {alive} outlived their parent"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("task,data,message", [
    ("listops", "x.npz", "--task listops reads ListOps text"),
    ("image", "x.npz", "an .npz archive"),
    ("image", "x.tsv", "--task image reads a .npy array"),
])
def test_lra_probe_refuses_data_of_the_wrong_kind_before_loading(tmp_path, capsys, task, data, message):
    # the checkpoint does not even exist: the data kind is refused first, in one line
    assert main(["lra", "probe", str(tmp_path / "none.ckpt"), "--task", task, "--data", str(tmp_path / data)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_dask_address_where_nothing_listens_is_one_line(tmp_path, capsys):
    pytest.importorskip("distributed")
    from toyspt.cli.figs import main as figs_main

    t = time.time()
    rc = figs_main(["--quick", "--only", "accuracy", "--seeds", "0", "--out", str(tmp_path / "o"),
                    "--cache", str(tmp_path / "c"), "--dask", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and any("no scheduler answered at tcp://127.0.0.1:9" in line for line in err), err
    assert time.time() - t < 60  # a few seconds of connection timeout, not the old 30 s and a traceback


# ------------------------------------------------------------------------ disk faults

TINY = ["--task.n_train", "32", "--task.n_val", "16", "--task.n_test", "16", "--task.T", "8",
        "--train.epochs", "1", "--train.pre_epochs", "1"]
FAULTS = {  # what the writer raises on a full, read-only or failing disk -> the words reported
    "ENOSPC": (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    "EROFS": (OSError(errno.EROFS, "Read-only file system"), "Read-only file system"),
    "EIO": (OSError(errno.EIO, "Input/output error"), "Input/output error"),
    "torch": (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"),
              "torch's file writer failed"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_disk_fault_while_storing_is_one_line_and_keeps_stored_runs(cached, monkeypatch, capsys, fault):
    import toyspt.runs.cache as cache_mod

    err, words = FAULTS[fault]

    def failing_save(*args, **kwargs):
        raise err

    monkeypatch.setattr(cache_mod.torch, "save", failing_save)
    other = replace(BASE, seed=1)
    with pytest.raises(CacheError) as e:
        get_run(other, cached)
    msg = str(e.value)
    assert words in msg and str(cached.path(other)) in msg and "\n" not in msg, msg
    assert not list(cached.root.rglob(".tmp-*")) and not cached.path(other).exists()  # nothing half-written
    assert main(["train", "--recipe", "scratch", "--seed", "5", "--cache", str(cached.root), *TINY]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: run cache: cannot store") and words in lines[-1], lines
    monkeypatch.undo()
    assert cached.load(BASE) is not None  # the run stored before is kept


def test_a_disk_fault_while_writing_out_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    import toyspt.util.atomic as atomic

    class FullDisk(type(Path())):
        def write_text(self, *args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))

    out = tmp_path / "out"
    out.mkdir()
    (out / "compare.csv").write_text("kept\n")
    monkeypatch.setattr(atomic, "Path", FullDisk)
    argv = ["compare", "--arms", "scratch", "--seeds", "0", "--cache", str(tmp_path / "c"), "--out", str(out), *TINY]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == f"error: {out / 'compare.csv'}: cannot write it: No space left on device; nothing " \
                        "half-written was left", lines
    assert sorted(p.name for p in out.iterdir()) == ["compare.csv"] and (out / "compare.csv").read_text() == "kept\n"
    monkeypatch.undo()
    monkeypatch.setattr(RunSpec, "execute", lambda *a, **k: pytest.fail("the stored run was trained again"))
    assert main(argv) == 0 and (out / "compare.csv").read_text() != "kept\n"  # the run itself was kept


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (root with mount(8) only; skipped elsewhere): a real ENOSPC."""
    where = tmp_path / "full"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("needs to mount a tiny tmpfs (root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_really_full_disk_is_one_line_for_the_cache_and_for_out(full_disk, tmp_path, capsys):
    assert main(["train", "--recipe", "scratch", "--cache", str(full_disk / "c"), *TINY]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: run cache: cannot store") and str(full_disk / "c") in line, line
    assert not list((full_disk / "c").rglob(".tmp-*"))
    gc.collect()  # torch's failed writer holds the removed weights.pt open until collected
    fd = os.open(full_disk / "filler", os.O_WRONLY | os.O_CREAT)
    with pytest.raises(OSError, match="No space left"):  # fill what is left
        while True:
            os.write(fd, b"x" * 4096)
    os.close(fd)
    argv = ["compare", "--arms", "scratch", "--seeds", "0", "--cache", str(tmp_path / "c"),
            "--out", str(full_disk / "out"), *TINY]
    assert main(argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"error: {full_disk / 'out'}") and "No space left on device" in line, line
    assert not [p for p in (full_disk / "out").iterdir()]  # nothing half-written


def test_out_files_keep_the_umask_and_an_existing_files_mode(tmp_path, capsys):
    argv = ["compare", "--arms", "scratch", "--seeds", "0", "--cache", str(tmp_path / "c"),
            "--out", str(tmp_path / "out"), *TINY]
    old = os.umask(0o027)
    try:
        assert main(argv) == 0
        modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "out").iterdir()}
        assert modes == dict.fromkeys(["compare.csv", "compare.json", "per_seed.csv"], 0o640), modes  # not 0600
        os.chmod(tmp_path / "out" / "compare.csv", 0o644)
        assert main(argv) == 0
        assert (tmp_path / "out" / "compare.csv").stat().st_mode & 0o777 == 0o644  # replaced, mode kept
    finally:
        os.umask(old)
