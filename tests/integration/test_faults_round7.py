

# ------------------------------------------------------------------ messages

def test_kinds_come_from_the_registry_and_duplicates_are_counted_apart(tmp_path, capsys):
    recs = committed_records(40)
    probe = next(r for r in recs if r["kind"] == "proximity")
    odd = seal({**probe, "kind": "a os.system"})  # once printed as a kind: "a os.system 1"
    path = write_ledger(tmp_path / "l.jsonl", [bare(recs[0]), bare(recs[0]), odd])
    rc, said = run(capsys, ["ledger", "check", str(path)])
    assert "os.system" not in said and "of no known kind 1" in said, said
    assert "2 records (" in said and "and 1 duplicate line(s)" in said
    assert "1 of 2 records carry no digest (2 line(s), 1 of them a duplicate of a record" in said  # once: 2 of 1


def test_verify_of_nothing_exits_2(tmp_path, capsys):
    path = write_ledger(tmp_path / "l.jsonl", [])
    rc, said = run(capsys, ["ledger", "verify", str(path)])
    assert rc == 2 and "no run record to verify" in said  # once: exit 0, "0 records"
