"""Figure (lra tier): the paper's LRA claims against the second LRA study's runs
(:mod:`toyspt.studies.lra2_design`: every arm trained out by one stopping rule, SPT under the loss
that learns), drawn as the first study's are (:mod:`toyspt.figs.lra_claims`: the same columns,
families, gates and verdicts). A figure of its own because the second study trains in pieces over
many sittings: the first study's claims redraw from the ledger while this one waits for its runs.

Writes ``lra_claims2.csv`` (:data:`toyspt.figs.lra_claims.COLUMNS`) and ``lra_claims2_runs.csv``.
"""
from __future__ import annotations

from toyspt.figs import lra_claims
from toyspt.studies import lra_design as design

NAME = "lra_claims2"
TITLE = "The paper's LRA claims against the second study: every arm trained out, SPT that learns"
TIERS = (design.TIER,)
COLUMNS = lra_claims.COLUMNS
STUDY = 2


def specs(ctx):
    """``(2, task, arm, seed)`` -> every run of the second study and the CNN references of its image tasks."""
    return ctx.study.claim_specs(STUDY)


def draw(ctx, runs):
    return lra_claims.draw(ctx, runs, NAME)
