"""The one bounded reader (toyspt.util.safeload): file types refused by stat before any read,
records counted from the zip directory, tensors priced by what they materialise."""
import io
import os
import zipfile

import pytest
import torch

from toyspt.util import safeload
from toyspt.util.files import Refused, UnsafeFile, open_regular, regular_size
from toyspt.util.picklescan import Budget


def test_plain_file_loads(tmp_path):
    sd = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2)}
    torch.save({"state_dict": sd, "step": 3}, tmp_path / "a.pt")
    back = safeload.load(tmp_path / "a.pt")
    assert back["step"] == 3 and torch.equal(back["state_dict"]["w"], sd["w"])


@pytest.mark.parametrize("kind", ["fifo", "chardev", "folder"])
def test_special_files_are_refused_by_type_before_reading(tmp_path, kind):
    path = {"chardev": "/dev/zero", "folder": str(tmp_path)}.get(kind, str(tmp_path / "fifo"))
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block without a writer
    word = {"fifo": "a FIFO", "chardev": "a character device", "folder": "a directory"}[kind]
    for call in (lambda: open_regular(path, "vocabulary"), lambda: safeload.load(path)):
        with pytest.raises(UnsafeFile, match=word):
            call()


def test_size_is_read_before_content(tmp_path):
    p = tmp_path / "big.txt"
    p.write_bytes(b"x" * 1000)
    assert regular_size(p) == 1000
    with pytest.raises(UnsafeFile, match="1000 bytes, over the limit of 999"):
        open_regular(p, "data file", max_bytes=999)


def test_record_count_is_counted_not_declared(tmp_path):
    torch.save({str(i): torch.zeros(1) for i in range(10)}, tmp_path / "a.pt")  # 10 storages + ~6
    with zipfile.ZipFile(tmp_path / "a.pt") as z:
        n = len(z.infolist())
    with pytest.raises(UnsafeFile, match=f"more than {n - 1} records"):
        safeload.load(tmp_path / "a.pt", budget=Budget(max_records=n - 1))
    assert len(safeload.load(tmp_path / "a.pt", budget=Budget(max_records=n))) == 10


def test_views_are_priced_by_what_they_materialise(tmp_path):
    base = torch.zeros(1 << 16)  # 256 KiB
    torch.save({f"w{i}": base[:] for i in range(3)}, tmp_path / "a.pt")  # 3 views, one storage
    size = os.path.getsize(tmp_path / "a.pt")
    ok = Budget(alias_factor=3, slack_bytes=1)  # 3 x 256 KiB <= 3 x file size
    assert len(safeload.load(tmp_path / "a.pt", budget=ok)) == 3
    with pytest.raises(UnsafeFile, match=f"would materialise {3 << 18} bytes .* file of {size}"):
        safeload.load(tmp_path / "a.pt", budget=Budget(alias_factor=2, slack_bytes=1))


def test_code_in_the_pickle_is_refused_by_name(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, ("true",))

    buf = io.BytesIO()
    torch.save({"x": Boom()}, buf)
    (tmp_path / "a.pt").write_bytes(buf.getvalue())
    with pytest.raises(Refused, match="system"):
        safeload.load(tmp_path / "a.pt")


# ------------------------------------------- the bytes torch loads are the bytes scanned

def _hidden_behind(tmp_path, surgery):
    """A torch.save file whose zip surgery shows torch another pickle than the one in the
    archive's classic directory or under its exact name; torch itself really reads it."""
    import pickle


    buf = io.BytesIO()
    torch.save({"shown": torch.arange(3.0)}, buf)
    path = tmp_path / "a.pt"
    path.write_bytes(surgery(buf.getvalue(), pickle.dumps({"hidden": 1}, protocol=2)))
    assert torch.load(path, weights_only=True) == {"hidden": 1}  # the differential is real
    return path


def test_a_second_zip64_directory_is_refused(tmp_path):
    from helpers import zipcraft

    path = _hidden_behind(tmp_path, zipcraft.second_directory)
    with pytest.raises(UnsafeFile, match="zip64 and classic directories disagree"):
        safeload.load(path)


def test_records_equal_up_to_case_are_refused(tmp_path):
    from helpers import zipcraft

    path = _hidden_behind(tmp_path, zipcraft.case_twin)
    with pytest.raises(UnsafeFile, match=r"records 'archive/[dD]ata.pkl' and 'archive/[dD]ata.pkl' differ only "
                                         "in case"):
        safeload.load(path)


def test_torch_is_handed_only_the_scanned_records(tmp_path, monkeypatch):
    """With the directory check switched off (the classic directory read as before), torch
    still loads the scanned pickle, not the one the zip64 directory names."""
    import struct

    from helpers import zipcraft

    from toyspt.util import zipdir

    def classic_only(f, size, where):
        tail = zipdir.read_at(f, size - 22, 22)
        _, _, _, declared, cd_size, cd_off, _ = struct.unpack("<HHHHIIH", tail[4:22])
        return declared, cd_size, cd_off, size - 22

    path = _hidden_behind(tmp_path, zipcraft.second_directory)
    monkeypatch.setattr(zipdir, "_directory", classic_only)
    assert list(safeload.load(path)) == ["shown"]


def test_the_clean_archive_holds_exactly_the_scanned_records(tmp_path):
    from helpers import zipcraft

    torch.save({"a": torch.ones(2), "b": torch.zeros(3, dtype=torch.uint16)}, tmp_path / "a.pt")
    with zipfile.ZipFile(tmp_path / "a.pt", "a") as z:
        z.writestr("archive/data/99", b"never named by the pickle")
    f, size = open_regular(tmp_path / "a.pt")
    with f:
        archive = safeload.check_file(f, size, "a.pt")
        with zipfile.ZipFile(archive) as z:
            names = sorted(z.namelist())
            pkl = z.read("archive/data.pkl")
    assert names == ["archive/byteorder", "archive/data.pkl", "archive/data/0", "archive/data/1",
                     "archive/version"]
    assert pkl == zipcraft.data_pkl((tmp_path / "a.pt").read_bytes())


# --------------------------------------------------- read what torch's loader reads

def _dtypes_torch_reads():
    """Every dtype whose tensor torch.save writes and torch's weights-only loader reads back."""
    out = []
    for dt in sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str):
        try:
            buf = io.BytesIO()
            torch.save(torch.arange(48, dtype=torch.uint8).view(dt), buf)
            buf.seek(0)
            torch.load(buf, weights_only=True)
        except (KeyError, RuntimeError, TypeError):  # sub-byte int1..uint7: no storage to save
            continue
        out.append(dt)
    return out


def _same(a, b) -> bool:
    """Equal type and value; tensors bitwise (dtype, shape, strides, offset, storage bytes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return ((a.dtype, a.shape, a.stride(), a.storage_offset(), bytes(a.untyped_storage()),
                 a.requires_grad, getattr(a, "__dict__", {}).keys())
                == (b.dtype, b.shape, b.stride(), b.storage_offset(), bytes(b.untyped_storage()),
                    b.requires_grad, getattr(b, "__dict__", {}).keys()))
    if isinstance(a, dict):  # an OrderedDict's attributes (a state dict's _metadata) too
        attrs = getattr(a, "__dict__", None), getattr(b, "__dict__", None)
        return (list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
                and (attrs == (None, None) or _same(*attrs)))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _values():
    from collections import Counter, OrderedDict

    base = torch.arange(12.0).reshape(3, 4)
    tagged = torch.ones(2)
    tagged.note = "kept"  # a tensor with attributes: torch._tensor._rebuild_from_type_v2
    return {
        "dtypes": {str(dt): torch.arange(48, dtype=torch.uint8).view(dt) for dt in _dtypes_torch_reads()},
        "views": [base, base.t(), base[1:, ::2], base[0], torch.tensor(3.5), torch.zeros(0, 3)],
        "ranks": [torch.zeros([1] * 17), torch.zeros([1] * 64), torch.zeros([2] + [1] * 99)],
        "complex": [torch.ones(2, dtype=torch.complex64).conj(), 1 + 2j, complex(0, -1.5)],
        "parameter": torch.nn.Parameter(torch.ones(3)), "tagged": tagged,
        "state_dict": torch.nn.Linear(2, 3).state_dict(),  # an OrderedDict with a BUILD state
        "containers": [{1, "a", (2, 3)}, set(), Counter("abracadabra"), Counter(),
                       OrderedDict(b=1, a=2), (1, (2, [3])), {(1, "k"): None}],
        "bytes": [b"\x00\xffabc", bytearray(b"xyz\x80"), bytearray(), "text", "ünï"],
        "scalars": [2 ** 100, -5, 1.5, True, None, torch.Size([2, 3]), torch.device("cpu"),
                    torch.float16, torch.strided],
    }


def test_every_value_torch_reads_loads_identically(tmp_path):
    values = _values()
    names = {str(dt) for dt in _dtypes_torch_reads()}
    assert {"torch.float8_e4m3fn", "torch.float8_e5m2", "torch.uint16", "torch.uint32", "torch.uint64",
            "torch.bool", "torch.complex32", "torch.bfloat16"} <= names  # not vacuous
    for key, value in values.items():
        torch.save(value, tmp_path / f"{key}.pt")
        want = torch.load(tmp_path / f"{key}.pt", weights_only=True)
        assert _same(safeload.load(tmp_path / f"{key}.pt"), want), key


@pytest.mark.parametrize("make,words", [
    (lambda: torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8), "a quantized tensor"),
    (lambda: torch.ones(2, 2).to_sparse(), "a sparse tensor"),
    (lambda: torch.ones(2, device="meta"), "a meta tensor"),
])
def test_tensors_this_reader_does_not_read_are_refused_in_words(tmp_path, make, words):
    torch.save(make(), tmp_path / "a.pt")
    torch.load(tmp_path / "a.pt", weights_only=True)  # torch's loader reads it
    with pytest.raises(UnsafeFile, match=f"its pickle holds {words} .*only dense tensors are read"):
        safeload.load(tmp_path / "a.pt")


def test_a_file_truncated_after_its_check_is_one_line(tmp_path, monkeypatch):
    """Storages are read when torch asks for them: a file cut short meanwhile is named as such."""
    torch.save({"w": torch.ones(1 << 16)}, tmp_path / "a.pt")
    checked = safeload.check_file

    def check_then_truncate(f, size, where, *args, **kwargs):
        archive = checked(f, size, where, *args, **kwargs)
        os.truncate(where, 1000)
        return archive

    monkeypatch.setattr(safeload, "check_file", check_then_truncate)
    with pytest.raises(UnsafeFile, match=r"a.pt: the file changed while being read \(record 'a/data/0' is shorter"):
        safeload.load(tmp_path / "a.pt")


def test_ctrl_c_inside_torchs_reads_is_an_interrupt_not_damage(tmp_path, monkeypatch):
    """torch's C++ reader calls back into Python for each read; a KeyboardInterrupt raised in
    such a callback came out of torch as AttributeError ("'Archive' object has no attribute
    'read'"), which the run cache took for a damaged entry and set aside (seen once when Ctrl-C
    fell on a sweep's cache read)."""
    import signal

    from toyspt.util import zipdir

    torch.save({f"w{i}": torch.ones(64) for i in range(4)}, tmp_path / "a.pt")
    calls = []

    read = zipdir.Archive.readinto

    def interrupted_on_the_second_read(self, b):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C does, mid-read
        return read(self, b)

    monkeypatch.setattr(zipdir.Archive, "readinto", interrupted_on_the_second_read)
    with pytest.raises(KeyboardInterrupt):
        safeload.load(tmp_path / "a.pt")
    assert len(calls) >= 2 and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_three_views_of_one_storage_load_as_torch_reads_them(tmp_path):
    base = torch.arange(1 << 20, dtype=torch.float32)  # 4 MiB, saved once
    torch.save({"a": base, "b": base[:], "c": base.view(1024, 1024)}, tmp_path / "v.pt")
    got = safeload.load(tmp_path / "v.pt")  # once refused as 12 MiB over 2 x the file size
    assert torch.equal(got["c"].flatten(), base) and got["a"].untyped_storage().data_ptr() == \
        got["c"].untyped_storage().data_ptr()
