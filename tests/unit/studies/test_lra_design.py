"""The LRA study's design (toyspt.studies.lra_design) and the pilot's specs (toyspt.studies.lra_pilot): arms paired
by seed, the pre-registered seeds, pilot seeds never reused, the pilot table rendered."""
import pandas as pd
import pytest

from toyspt.studies.lra_design import CONFIRMATORY_ARMS, PAPER, TASKS, study_specs
from toyspt.studies.lra_pilot import PILOT_SEEDS, markdown_table, pilot_specs


def test_study_specs_pair_arms_by_seed_with_the_preregistered_seeds():
    specs = study_specs()
    seeds = {}
    for label, spec in specs.items():
        task, arm, seed = label.split("/")
        assert spec.seed == int(seed) and spec.seed not in PILOT_SEEDS
        seeds.setdefault((task, arm), set()).add(spec.seed)
        scratch = specs[f"{task}/scratch/{seed}"]
        assert spec.data == scratch.data and spec.train.epochs == scratch.train.epochs
    for task in ("pathfinder", "image"):
        for arm in ("scratch", "spt", "qk_transfer"):
            assert seeds[task, arm] == set(range(20))
    assert all(len(s) >= 10 for s in seeds.values())
    assert specs["listops/spt_mask50/0"].train.mask_rate == 0.5 and specs["listops/spt/0"].train.mask_rate == 0.1
    assert specs["image/no_attention/3"].model.qk_init_scale == 0
    assert specs["image/no_attention/3"].recipe == "frozen_attention"
    assert specs["pathfinder/depth2_spt/1"].model.n_layers == 2
    assert set(TASKS) == {t for t, _ in PAPER} and all(a in CONFIRMATORY_ARMS for _, a in PAPER)


def test_pilot_specs_and_table():
    specs = pilot_specs(quick=True)
    assert {s.seed for s in specs.values()} <= set(PILOT_SEEDS)
    frame = pd.DataFrame([dict(task="t", arm="scratch", seed=1000, n_train=8, majority_val=0.5, d_model=8,
                               n_heads=1, n_layers=1, label_epochs=2, mask_rate=0.5, peak_val_acc=0.5,
                               mean_test_last20=0.25, final_train_acc=0.75, spt_val_loss_first=float("nan"),
                               spt_val_loss_last=float("nan"), spt_tail_change=float("nan"), seconds=1.5)])
    table = markdown_table(frame).splitlines()
    assert len(table) == 3 and "| 0.500 | 0.250 | 0.750 |  |  |  | 2 |" in table[2]


def test_the_ledger_covers_every_kind_of_the_studys_runs_and_the_order_is_seed_by_seed():
    from toyspt.runs.ledger import data_kind
    from toyspt.studies.lra_design import KINDS, LEDGER, Study

    study = Study.for_tier("lra")
    specs = study.specs()
    assert {f"{t}/{a}/{s}" for t, a, s in specs} == set(study_specs())
    assert LEDGER.kinds == KINDS and str(LEDGER.path) == "figures/ledger/lra.jsonl"
    every = [*specs.values(), *(p for s in specs.values() if (p := s.parent()) is not None)]  # SPT-only parents too
    assert any(s.recipe == "spt_only" for s in every)
    assert {data_kind(s) for s in every} == set(KINDS)
    assert all(Study.phase(s, None) == s.seed for s in every)
    seeds = [s for _, _, s in specs]
    assert seeds == sorted(seeds)  # a prefix of the study's order holds whole seeds
    quick = Study.for_tier("lra", quick=True, seeds=(3, 4)).specs()
    assert {(t, a) for t, a, _ in quick} == {(t, a) for t, a, _ in specs} and {s for *_, s in quick} == {3, 4}
    assert Study.phase(pilot_specs(quick=True)["digits8/scratch/1000"], None) == 1000
    from toyspt.figs import FigContext

    assert Study.phase(FigContext(out=".").base, None) is None  # toy data: not the study's


def test_the_tracked_twins_are_the_study_runs_at_the_mechanism_seeds_and_train_after_every_study_seed():
    from toyspt.runs.arms import arm_spec
    from toyspt.studies.lra_design import CAUSE_ARMS, TWINS_AFTER, Study
    from toyspt.studies.lra_mechanism import MECHANISM_SEEDS

    study = Study.for_tier("lra")
    specs, twins = study.specs(), study.mechanism()
    cause = {(t, a, s) for t, arms in CAUSE_ARMS.items() for a in arms for s in MECHANISM_SEEDS}
    assert cause and set(twins) == {k for k in specs if k[2] in MECHANISM_SEEDS} | cause
    for k, twin in twins.items():
        if k in cause:  # a twin of no study run: the cause arm on the study run's init and data
            (untracked,) = twin.twins()
            assert untracked == arm_spec(CAUSE_ARMS[k[0]][k[1]], specs[k[0], "scratch", k[2]]) and k not in specs
            assert twin.trackers and untracked.train.recon == "mse"
            continue
        assert twin.trackers and specs[k] in twin.twins()  # the twin trains its study run's run
    last = max(Study.phase(s, None) for s in specs.values())
    assert min(Study.phase(s, None) for s in twins.values()) > last
    assert Study.phase(twins["image", "spt", 2], None) == TWINS_AFTER + 2
    quick = Study.for_tier("lra", quick=True, seeds=(2, 5)).mechanism()
    assert set(quick) <= {(t, a, 2) for t, a, _ in [*specs, *cause]}


def test_the_pilot_stages_name_one_pilot_or_the_other():
    import pytest

    from toyspt.studies.lra_design import Study

    with pytest.raises(ValueError, match="unknown 'x'"):
        Study.pilot(None, stages=("a", "x"))
    with pytest.raises(ValueError, match="not both"):
        Study.pilot(None, stages=(1, "a"))
    with pytest.raises(ValueError, match="no smoke version"):
        Study.pilot(None, quick=True, stages=("a",))


@pytest.mark.parametrize("flags, says", [(["--stages", "1", "--recorded"], "--recorded: the first pilot"),
                                         (["--stages", "1,2", "--ledger", "x.jsonl"], "--ledger: the first pilot"),
                                         (["--stages", "a", "--recorded", "--ledger", "{tmp}/none.jsonl"],
                                          "none.jsonl: no such ledger file"),
                                         (["--stages", "a,b", "--recorded", "--ledger", "{tmp}/empty.jsonl"],
                                          "empty.jsonl: records no run of stages a, b")])
def test_the_pilot_refuses_what_it_does_not_honour_in_one_line(tmp_path, capsys, flags, says):
    """Each pilot option is honoured or refused by name (``--recorded`` among them: a flag the CLI
    passes only when set), before anything trains."""
    from toyspt.cli.main import main

    (tmp_path / "empty.jsonl").write_bytes(b"")
    argv = ["study", "pilot", "lra", *(f.format(tmp=tmp_path) for f in flags)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and says in err[-1]


def test_the_second_study_is_paired_by_seed_with_one_rule_for_every_arm():
    from toyspt.studies import lra2_design as two

    specs = two.study_specs()
    assert len(specs) == 2 * (20 * 3 + 10 * 4)
    rules = {(s.train.patience, s.train.pre_patience, s.train.epochs, s.train.pre_epochs) for s in specs.values()}
    assert rules == {(two.PATIENCE, two.PRE_PATIENCE, two.LABEL_CAP, two.SPT_CAP)}
    for (task, arm, seed), s in specs.items():
        assert s.seed == seed and s.train.recon == two.RECON[task][0] and s.train.mask_rate == two.RECON[task][1]
        assert s.group() is None  # a run with a stopping rule trains alone
    assert {a for _, a, s in specs if s >= 10} == {"scratch", "spt", "qk_transfer"}
    assert two.MARGINS["listops"] >= 2 * (0.25 / two.DATA["listops"].n_val) ** 0.5
    assert two.MARGINS["image"] >= 2 * (0.25 / two.DATA["image"].n_val) ** 0.5
