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
