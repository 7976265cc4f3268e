"""Atomic writes (toyspt.util.atomic): a new file gets the umask's mode, a replaced one keeps its
own; a disk fault is one WriteError naming the file, the old content kept, no temporary left."""
import errno
import os
import stat

import pytest
import torch

from toyspt.util.atomic import WriteError, atomic_write, disk_fault, write_text


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    """Set the process umask for one test (restored after)."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda mask: os.umask(mask)
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_a_new_file_gets_the_mode_of_the_umask(tmp_path, umask, mask):
    umask(mask)
    write_text(tmp_path / "a.csv", "x\n")
    assert _mode(tmp_path / "a.csv") == 0o666 & ~mask  # mkstemp's 0600 before


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o664])
def test_a_replaced_file_keeps_its_mode(tmp_path, umask, mode):
    umask(0o077)
    (tmp_path / "a.csv").write_text("old\n")
    os.chmod(tmp_path / "a.csv", mode)
    write_text(tmp_path / "a.csv", "new\n")
    assert _mode(tmp_path / "a.csv") == mode and (tmp_path / "a.csv").read_text() == "new\n"


@pytest.mark.parametrize("err,words", [
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    (OSError(errno.EROFS, "Read-only file system"), "Read-only file system"),
    (OSError(errno.EIO, "Input/output error"), "Input/output error"),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"),
     "torch's file writer failed ([enforce fail at inline_container.cc:672]"),
])
def test_a_disk_fault_is_one_write_error_and_leaves_nothing(tmp_path, err, words):
    (tmp_path / "a.pt").write_text("old\n")

    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(b"half")
        raise err

    with pytest.raises(WriteError) as e:
        atomic_write(tmp_path / "a.pt", write)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'a.pt'}: cannot write it: ") and words in msg and "\n" not in msg
    assert os.listdir(tmp_path) == ["a.pt"] and (tmp_path / "a.pt").read_text() == "old\n"


def test_a_bug_in_the_writer_keeps_its_traceback(tmp_path):
    def write(tmp):
        raise RuntimeError("a bug, not the disk")

    with pytest.raises(RuntimeError, match="a bug, not the disk"):
        atomic_write(tmp_path / "a.txt", write)
    assert os.listdir(tmp_path) == []
    assert disk_fault(ValueError("x")) is None


def test_torch_save_through_atomic_write_is_readable(tmp_path, umask):
    umask(0o022)
    atomic_write(tmp_path / "w.pt", lambda tmp: torch.save({"w": torch.ones(2)}, tmp))
    assert torch.equal(torch.load(tmp_path / "w.pt", weights_only=True)["w"], torch.ones(2))
    assert _mode(tmp_path / "w.pt") == 0o644


def test_ctrl_c_waits_until_files_written_together_are_written(tmp_path):
    import os
    import signal

    import pytest

    from toyspt.util.atomic import uninterrupted, write_text

    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)  # arrives here, is held
            write_text(tmp_path / "a.csv", "a")
            write_text(tmp_path / "a.png", "b")
    assert (tmp_path / "a.csv").read_text() == "a" and (tmp_path / "a.png").read_text() == "b"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_ctrl_c_held_in_a_block_that_fails_still_interrupts_with_the_error_as_context():
    import signal

    from toyspt.util.atomic import uninterrupted

    with pytest.raises(KeyboardInterrupt) as info:
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)
            raise ValueError("the block's own error")
    assert isinstance(info.value.__context__, ValueError)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_stays_ignored_where_it_was_ignored():
    """A sweep's workers ignore SIGINT (the parent handles Ctrl-C); a held signal must not
    become a KeyboardInterrupt there."""
    import signal

    from toyspt.util.atomic import uninterrupted

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_fifo_or_a_folder_in_the_way_is_refused_and_kept(tmp_path):
    """Renaming over them would replace them (run as root, ``--json /dev/null`` once replaced
    the device with a regular file)."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "folder").mkdir()
    for name, words in (("pipe", "not a regular file"), ("folder", "a folder")):
        with pytest.raises(WriteError, match=f"{name}: cannot write it: {words}; nothing was written"):
            write_text(tmp_path / name, "x\n")
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode) and (tmp_path / "folder").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "pipe"]  # no temporary left


def test_a_link_is_replaced_and_what_it_pointed_to_is_never_written(tmp_path):
    (tmp_path / "real.csv").write_text("old\n")
    (tmp_path / "link.csv").symlink_to("real.csv")
    write_text(tmp_path / "link.csv", "new\n")
    assert not (tmp_path / "link.csv").is_symlink() and (tmp_path / "link.csv").read_text() == "new\n"
    assert (tmp_path / "real.csv").read_text() == "old\n"


def test_a_link_out_of_the_tree_is_named_and_a_path_named_outside_is_not(tmp_path, monkeypatch):
    from toyspt.util.atomic import outside_through_link

    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "in").mkdir(parents=True)
    outside.mkdir()
    (tree / "out").symlink_to(outside)
    (tree / "here").symlink_to(tree / "in")
    (tmp_path / "home").symlink_to(tree)  # the tree reached through a linked folder above it
    monkeypatch.chdir(tree)
    assert outside_through_link("out/l.jsonl") == str(outside / "l.jsonl")
    assert outside_through_link("here/l.jsonl") is None and outside_through_link("in/l.jsonl") is None
    assert outside_through_link(outside / "l.jsonl") is None  # named outside: the caller's choice
    assert outside_through_link(tmp_path / "home" / "in" / "l.jsonl") is None
