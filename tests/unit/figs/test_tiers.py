"""One list of tiers, each run by one study: the real-data design's tiers and the LRA study's;
the figure job and every figure name only those, and a job opens its tier's study's ledger."""
from argparse import Namespace

import pytest

from toyspt.cli import figs as cli_figs
from toyspt.figs import DEFAULT_TIERS, FIGURES, STUDIES, TIERS, in_tier, load
from toyspt.studies import lra_design as lra
from toyspt.ucr import design as ucr


def test_the_figure_tiers_are_the_studies():
    assert TIERS == (*ucr.TIERS, lra.TIER) and DEFAULT_TIERS == tuple(ucr.TIERS)
    assert {t: s for t, s in STUDIES.items()} == {"default": ucr.Study, "study": ucr.Study, "lra": lra.Study}
    for name in FIGURES:
        own = getattr(load(name), "TIERS", DEFAULT_TIERS)
        assert own and set(own) <= set(TIERS), name
    # the lra tier draws its own figure only, and no other tier draws it
    drawn = ["lra_claims", "lra_mechanism", "lra_claims2", "lra_mechanism2"]
    assert [n for n in FIGURES if in_tier(load(n), "lra")] == drawn
    assert not any(in_tier(load(n), t) for t in ucr.TIERS for n in ("lra_claims", "lra_mechanism"))


@pytest.mark.parametrize("tier, ledger", [("default", ucr.LEDGER), ("study", ucr.LEDGER), ("lra", lra.LEDGER)])
def test_a_job_opens_the_ledger_of_its_tiers_study(monkeypatch, tier, ledger):
    seen = []
    monkeypatch.setattr(cli_figs, "open_ledger", lambda path, study, tier: seen.append((path, study, tier)))
    cli_figs.ledger_of(Namespace(ledger=None, quick=False, tier=tier))
    cli_figs.ledger_of(Namespace(ledger=None, quick=True, tier=tier))
    assert seen == [(str(ledger.path), ledger, tier), (None, ledger, tier)]


def test_the_lra_study_refuses_what_it_does_not_honour():
    lra.Study.refuse(quick=False, seeds=None, numerics="eager", contrast=None)  # the study as pre-registered
    lra.Study.refuse(quick=True, seeds=(0, 1), numerics="eager", contrast=False)  # its smoke version at any seeds
    for kw, flag in ((dict(seeds=(0, 1)), "--seeds"), (dict(numerics="compiled"), "--compile"),
                     (dict(contrast=True), "--contrast")):
        with pytest.raises(ValueError, match=flag):
            lra.Study.refuse(**{**dict(quick=False, seeds=None, numerics="eager", contrast=None), **kw})
    with pytest.raises(ValueError, match="--compile"):
        lra.Study.for_tier("lra", numerics="compiled")
    with pytest.raises(ValueError, match="tier"):
        lra.Study.for_tier("study")
    ucr.Study.refuse(quick=False, seeds=(0, 1), numerics="compiled", contrast=True)  # the UCR tiers honour them
