"""Numbers quoted in the docs' prose (toyspt.figs.doc_numbers): each marker read from its source
and printed as it says; a wrong number caught and rewritten; what cannot be rewritten (a text, a
marker after no number, a source outside the root, a path the source lacks) refused by name."""
import json

import pytest

from toyspt.cli.main import main
from toyspt.figs.doc_numbers import QuoteError, count, quotes, refresh

META = {"figures": {"accuracy": {"gain": 0.344, "seeds": [0, 1], "at": "ECG200 spt"},
                    "standing": {"rocket_train+val": {"sets": 16}}}}


@pytest.fixture
def root(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "metadata.json").write_text(json.dumps(META))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "study.json").write_text(json.dumps({"cpu_hours": 8.4812, "groups": [{"n": 1234}]}))
    return tmp_path


OK = ("gain +34.4<!-- meta figures.accuracy.gain +.1f 100 --> points, "
      "seed 1<!-- meta figures.accuracy.seeds.1 d -->, 16<!-- meta figures.standing.rocket_train+val.sets d --> sets, "
      "best ECG200 spt<!-- meta figures.accuracy.at s -->; 8.48<!-- from docs/study.json cpu_hours .2f --> "
      "CPU-hours over 1,234<!-- from docs/study.json groups.0.n ,d -->")


def test_every_marker_is_read_and_printed_as_it_says(root):
    got = [(q.path, q.want, q.found) for q in quotes(OK, root)]
    assert got == [("figures.accuracy.gain", "+34.4", "+34.4"), ("figures.accuracy.seeds.1", "1", "1"),
                   ("figures.standing.rocket_train+val.sets", "16", "16"), ("figures.accuracy.at", "ECG200 spt",
                   "ECG200 spt"), ("cpu_hours", "8.48", "8.48"), ("groups.0.n", "1,234", "1,234")]
    assert refresh(OK, root) == OK and count(OK) == len(got)


@pytest.mark.parametrize("old,new", [("+34.4<", "+34.5<"), ("+34.4<", "-3.1<"), ("seed 1<", "seed 12<"),
                                     ("8.48<", "8.5<"), ("8.48<", "1e-05<"), ("1,234<", "999<")])
def test_a_wrong_number_is_caught_and_rewritten(root, old, new):
    bad = OK.replace(old, new)
    assert [q.path for q in quotes(bad, root) if q.want != q.found]
    assert refresh(bad, root) == OK


def test_a_wrong_text_is_caught_but_not_guessed(root):
    bad = OK.replace("best ECG200 spt<", "best Wafer spt<")
    assert [q.path for q in quotes(bad, root) if q.want != q.found] == ["figures.accuracy.at"]
    with pytest.raises(QuoteError, match="'ECG200 spt'.*a text, not a number.*edit it by hand"):
        refresh(bad, root, page="p.md")


@pytest.mark.parametrize("text,match", [
    ("gain<!-- meta figures.accuracy.gain +.1f 100 -->", "no number to rewrite"),
    ("gain x34.4<!-- meta figures.accuracy.gain +.1f 100 -->", "no number to rewrite"),  # the tail of a word
    ("3<!-- meta figures.accuracy.gain -->", "1 meta marker"),  # a marker the pattern cannot read
    ("3<!-- from docs/study.json cpu_hours -->", "1 from marker"),
    ("3<!-- meta figures.accuracy.nope d -->", "no value at 'figures.accuracy.nope'"),
    ("3<!-- meta figures.accuracy.seeds.7 d -->", "no value at"),
    ("3<!-- from ../outside.json x d -->", "not under"),
    ("3<!-- from /etc/passwd x d -->", "not under"),
    ("3<!-- from docs/none.json x d -->", "none.json"),
    ("3<!-- meta figures.accuracy.at .2f -->", "cannot be printed as '.2f'"),
])
def test_what_cannot_be_read_or_rewritten_is_refused(root, text, match):
    with pytest.raises(QuoteError, match=match):
        refresh(text, root)


def test_a_source_that_is_not_json_is_refused(root):
    (root / "docs" / "study.json").write_text("<<<<<<< HEAD\n")
    with pytest.raises(QuoteError, match="study.json: not JSON"):
        quotes("8.48<!-- from docs/study.json cpu_hours .2f -->", root)


def test_the_docs_command_rewrites_quoted_numbers(root, capsys, monkeypatch):
    monkeypatch.chdir(root)
    (root / "docs" / "page.md").write_text(OK.replace("8.48<", "9.1<"))
    assert main(["docs", "docs/page.md", "--check"]) == 1
    assert (root / "docs" / "page.md").read_text() != OK  # --check writes nothing
    assert main(["docs", "docs/page.md"]) == 0
    assert (root / "docs" / "page.md").read_text() == OK
    assert "6 quoted number(s)" in capsys.readouterr().out
    (root / "docs" / "page.md").write_text(OK.replace("ECG200 spt<", "Wafer<"))
    assert main(["docs", "docs/page.md"]) == 2  # a clear error, the page left as it was
    assert "edit it by hand" in capsys.readouterr().err
    assert "Wafer<" in (root / "docs" / "page.md").read_text()
