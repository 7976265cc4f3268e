"""A new kind of data is one module that registers itself (toyspt.data.source.register): here a
tiny data source defined in this test, which ``toyspt compare --data tiny:NAME`` trains on with
its own model/training defaults, nothing in toyspt.cli changed."""
from dataclasses import dataclass

import pytest

from toyspt.cli.main import main
from toyspt.data import source
from toyspt.data.tasks import TaskConfig, make_task


@dataclass(frozen=True)
class TinySource:
    size: str = "x"
    kind = "tiny"

    @property
    def name(self) -> str:
        return f"tiny {self.size}"

    def load(self):
        return make_task(TaskConfig(T=8, n_train=48, n_val=16, n_test=16, seed=len(self.size)))

    def fingerprint(self) -> str:
        return f"tiny-{self.size}"

    def key_fields(self, swap) -> dict:
        return dict(kind=self.kind, data=dict(size=self.size))

    def fit(self, model):
        return model

    def probe_inputs(self):
        return self.load().val.x[:8]


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(source.SOURCES, "tiny", None)  # removed again after the test
    return source.register("tiny", lambda d: (TinySource(d["data"]["size"]), None),
                           from_args=lambda args, names, configs: ([TinySource(n) for n in names], None),
                           model_defaults=dict(d_model=8, d_mlp=16), train_defaults=dict(epochs=1, pre_epochs=1),
                           describe=lambda s: f"{s.name}: a tiny source", usage="tiny:SIZE")


def test_compare_runs_on_a_registered_kind(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["compare", "--data", "tiny:x,tiny:yy", "--arms", "scratch", "--seeds", "0", "--no-probes",
               "--cache", str(tmp_path / "cache"), "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "tiny x: a tiny source" in text and '"epochs": 1' in text
    per_seed = (out / "per_seed.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in per_seed[1:]] == ["tiny x", "tiny yy"]
    assert source.from_fields("tiny", dict(data=dict(size="x"))) == (TinySource("x"), None)
    # another kind's flags are refused with this kind's data, and kinds do not mix
    assert main(["compare", "--data", "tiny:x", "--ucr-root", str(tmp_path)]) == 2
    assert "--ucr-root: applies to ucr data" in capsys.readouterr().err
    assert main(["compare", "--data", "tiny:x,ucr:GunPoint"]) == 2
    assert "one kind of data per comparison" in capsys.readouterr().err
    assert main(["compare", "--data", "nope:x"]) == 2
    assert "unknown kind of data 'nope'" in capsys.readouterr().err
