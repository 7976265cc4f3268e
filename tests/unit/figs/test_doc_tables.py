"""The docs' tables are rendered from the figures' CSVs: each cell's format pinned on known
values, blocks rewritten and checked, bad blocks named."""
import math

import pandas as pd
import pytest

from toyspt.analysis.gains import ARCHIVE_COLUMNS, GAIN_COLUMNS
from toyspt.cli.main import main
from toyspt.figs.doc_tables import TableError, archive, gain, paired, refresh

INF = math.inf


def _gain_row(dataset, arm, metric, **kw):
    row = dict.fromkeys(GAIN_COLUMNS, math.nan)
    row.update(dataset=dataset, arm=arm, metric=metric, family="descriptive", n_seeds=40, mean_diff=0.0657333,
               ci_low=-0.0430337, ci_high=0.1745003, p_wilcoxon=0.1875, wins=4, ties=0, losses=1)
    row.update(kw)
    return row


def test_a_paired_row_reads_mean_interval_p_and_counts_in_the_papers_set_order():
    frame = pd.DataFrame([_gain_row("ECG200", "spt", "mean_test_last20", mean_diff=-0.0085, ci_low=-INF, ci_high=1e-4,
                                    p_wilcoxon=1.0, wins=1, ties=1, losses=3),
                          _gain_row("GunPoint", "spt", "mean_test_last20"),
                          _gain_row("GunPoint", "spt", "final_test_acc", p_wilcoxon=0.8125)])
    lines = paired(frame).splitlines()
    assert lines[0].startswith("| set | arm | diff. to scratch: **mean test, last 20%** (primary) |")
    assert lines[2] == ("| GunPoint | spt | +0.066 [-0.043, +0.175] p=0.188 (4/0/1) |  | "
                        "+0.066 [-0.043, +0.175] p=0.812 (4/0/1) |  |")
    assert lines[3] == "| ECG200 | spt | -0.009 [−∞, +0.000] p=1 (1/1/3) |  |  |  |"


def test_the_study_table_shows_the_primary_metric_its_contrasts_and_marks_the_confirmatory_rows():
    frame = pd.DataFrame([
        _gain_row("GunPoint", "spt", "mean_test_last20", family="confirmatory", hl=0.05, hl_low=0.01, hl_high=0.09,
                  p_holm=0.004, tost_p=0.9),
        _gain_row("GunPoint", "spt", "final_test_acc", family="descriptive"),
        _gain_row("GunPoint", "qk_transfer", "mean_test_last20", hl=0.04, hl_low=-0.01, hl_high=0.08, p_holm=0.02,
                  tost_p=0.6, spt_minus_arm=0.002, spt_minus_arm_low=-0.006, spt_minus_arm_high=0.01,
                  spt_minus_arm_tost_p=0.03, share=0.9, share_low=0.5, share_high=INF)])
    lines = gain(frame).splitlines()
    assert len(lines) == 4 and "TOST p (arm − scratch within ±0.01)" in lines[0]
    assert lines[2] == ("| GunPoint | spt ¹ | 40 | +0.066 [-0.043, +0.175] | +0.050 [+0.010, +0.090] | 0.004 | (4/0/1) "
                        "| 0.9 |  |  |  |")
    assert lines[3].endswith("| +0.002 [-0.006, +0.010] | 0.03 | +0.900 [+0.500, +∞] |")
    frame.loc[2, ["ci_low", "ci_high"]] = math.nan  # no spread: the t interval is undefined, not blank
    assert "| 40 | +0.066 [undefined] | +0.040 [-0.010, +0.080] |" in gain(frame).splitlines()[3]


def test_the_archive_table_has_one_row_per_set_with_its_unit():
    row = dict.fromkeys(ARCHIVE_COLUMNS, math.nan)
    row.update(dataset="GunPointMaleVersusFemale", unit="GunPoint family", n_seeds=10, gain=0.012, ci_low=-0.003,
               ci_high=0.027, p_holm=0.5, scratch_mean=0.9, spt_mean=0.912, qk_mean=0.905)
    (line,) = archive(pd.DataFrame([row])).splitlines()[2:]
    assert line == ("| GunPointMaleVersusFemale | GunPoint family | 10 | +0.012 [-0.003, +0.027] | 0.5 |  "
                    "| 0.900 | 0.912 | 0.905 |")


def test_a_block_is_rewritten_from_its_csv_and_bad_blocks_are_named(tmp_path):
    pd.DataFrame([_gain_row("GunPoint", "spt", "mean_test_last20")]).to_csv(tmp_path / "ucr_paired.csv", index=False)
    page = "intro\n<!-- table ucr_paired -->\n| typed | by hand |\n<!-- /table -->\nafter\n"
    new = refresh(page, tmp_path, "p.md")
    assert new.startswith("intro\n<!-- table ucr_paired -->\n| set | arm |")
    assert new.endswith("<!-- /table -->\nafter\n")
    assert "p=0.188 (4/0/1)" in new and refresh(new, tmp_path) == new
    with pytest.raises(TableError, match="p.md: no table named 'ucr_pared'"):
        refresh(page.replace("ucr_paired", "ucr_pared"), tmp_path, "p.md")
    with pytest.raises(TableError, match="p.md line 2: table block ucr_paired without its"):
        refresh(page.replace("<!-- /table -->", ""), tmp_path, "p.md")
    with pytest.raises(TableError, match="real_gain.csv does not exist"):
        refresh(page.replace("ucr_paired", "real_gain"), tmp_path, "p.md")


def test_the_docs_command_checks_then_rewrites(tmp_path, capsys):
    pd.DataFrame([_gain_row("GunPoint", "spt", "mean_test_last20")]).to_csv(tmp_path / "ucr_paired.csv", index=False)
    page = tmp_path / "p.md"
    page.write_text("<!-- table ucr_paired -->\n| stale |\n<!-- /table -->\n")
    assert main(["docs", str(page), "--figures", str(tmp_path), "--check"]) == 1
    assert "1 page(s) differ from" in capsys.readouterr().out and "| stale |" in page.read_text()
    assert main(["docs", str(page), "--figures", str(tmp_path)]) == 0
    assert main(["docs", str(page), "--figures", str(tmp_path), "--check"]) == 0
    assert main(["docs", str(tmp_path / "nope.md")]) == 2
    assert main(["docs", str(page), "--figures", str(page)]) == 2
    assert "--figures" in capsys.readouterr().err


def test_the_docs_command_outside_a_repository_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["docs"]) == 2
    assert "run it from the repository's root" in capsys.readouterr().err


def test_the_standing_table_puts_the_baselines_beside_the_transformers():
    from toyspt.figs.archive_scan import STANDING_COLUMNS
    from toyspt.figs.doc_tables import standing

    row = dict(dataset="ECG200", group="paper", unit="ECG200", n_seeds=40, scratch=0.8512, spt=0.8634,
               **{"1nn_dtw_train": 0.77, "1nn_dtw_train+val": 0.77, "rocket_train": 0.9, "rocket_train+val": math.nan})
    head, _, line = standing(pd.DataFrame([row], columns=STANDING_COLUMNS)).splitlines()
    assert head == ("| set | seeds | scratch | spt | 1-NN DTW (train) | 1-NN DTW (train+val) | ROCKET (train) "
                    "| ROCKET (train+val) |")
    assert line == "| ECG200 (paper) | 40 | 0.851 | 0.863 | 0.770 | 0.770 | 0.900 |  |"


def test_the_seed_block_table_reads_both_tests_and_says_when_blocks_were_sampled():
    from toyspt.analysis.seed_blocks import BLOCK_COLUMNS
    from toyspt.figs.doc_tables import seed_block

    row = dict(block_name="default_tier", dataset="GunPointAgeSpan", arm="spt", metric="mean_test_last20",
               seeds="0-4", n_block=5, n_other=35, block_mean=0.0344, other_mean=0.0074, difference=0.027,
               perm_p=0.00517, exact=True, blocks=658008, welch_p=0.0124, scan_seeds="0-4", scan_blocks=8,
               scan_difference=0.027, scan_p=0.0409, scan_p_holm=0.16)
    frame = pd.DataFrame([row, {**row, "block_name": "tracked_parents", "seeds": "0-9", "exact": False,
                                "blocks": 200000, "scan_seeds": math.nan}], columns=BLOCK_COLUMNS)
    lines = seed_block(frame).splitlines()
    assert lines[2] == ("| GunPointAgeSpan | default_tier (0-4) | +0.034 vs +0.007 | +0.027 | 0.00517 (658,008 blocks)"
                        " | 0.0124 | 0-4: +0.027 | 0.0409 | 0.16 |")
    assert "| tracked_parents (0-9) |" in lines[3] and "(200,000 blocks, sampled)" in lines[3]
    assert "|  | 0.0409 |" in lines[3]  # no consecutive block to name: blank, not 'nan'


def test_the_lra_claims_table_has_the_nine_confirmatory_rows_with_the_papers_numbers_and_verdicts():
    from tests.unit.figs.test_lra_claims import _frame
    from toyspt.figs import lra_claims as lc
    from toyspt.figs.doc_tables import claims

    table = lc.claims_table(_frame())
    lines = claims(table).splitlines()
    assert len(lines) == 2 + 9 and "TOST p (margin)" in lines[0] and "Holm p (signed-rank, of 9)" in lines[0]
    r = table[(table.task == "pathfinder") & (table.arm == "spt") & (table.metric == "peak_val_acc")].iloc[0]
    want = (f"| SPT beats scratch: pathfinder | +0.18 | 10 | {r.base_mean:.3f} → {r.arm_mean:.3f} "
            f"| {r.mean_diff:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}] "
            f"| {r.hl:+.3f} [{r.hl_low:+.3f}, {r.hl_high:+.3f}] "
            f"| {r.p_holm:.3g} | ({r.wins}/{r.ties}/{r.losses}) | {r.tost_p:.3g} (±0.02) "
            f"| {r.error_share:+.3f} [{r.error_share_low:+.3f}, {r.error_share_high:+.3f}] (+0.55) "
            "| confirmed | confirmed |")
    assert lines[2] == want
    assert "| W_Q, W_K from SPT alone beat scratch: listops | no number (its general claim: a gain) |" in claims(table)
    assert "| attention frozen at random init: listops | unchanged | 10 |" in claims(table)
    assert "| attention frozen at random init: pathfinder | -0.17 |" in claims(table)
    with pytest.raises(TableError, match="no column"):
        claims(table.drop(columns=["verdict"]))
