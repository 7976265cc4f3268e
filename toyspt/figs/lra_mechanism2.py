"""Figure (lra tier): the mechanism on the second LRA study's tasks, descriptively, as
:mod:`toyspt.figs.lra_mechanism` draws the first's: the tracked twins of every run of the second study
at seeds :data:`toyspt.studies.lra_mechanism.MECHANISM_SEEDS` (its pre-registration: "descriptive, on
tracked twins of seeds 0-2"). Does SPT that learns its reconstruction (its validation loss below the
best context-free prediction's, ``spt_loss`` in the metadata) give local attention, on the digits its
2-D neighbourhood (``neighbourhood_index``), and is that what Q/K transfer carries? Each twin is also
read at its label phase's start (``label_start``): the init with SPT's W_Q, W_K for qk_transfer, SPT's
model but W_Q, W_K for all_but_qk_transfer, beside scratch's init and SPT's pretrained model.

Writes ``lra_mechanism2.csv`` (:data:`toyspt.figs.lra_mechanism.COLUMNS`) and ``lra_claims_probes2.csv``.
"""
from __future__ import annotations

from toyspt.figs import lra_mechanism
from toyspt.studies import lra_design as design
from toyspt.studies.lra_claim_gates import AT_PEAK
from toyspt.studies.lra_mechanism import STATES2

NAME = "lra_mechanism2"
TITLE = "The mechanism on the second LRA study: does SPT that learns give local attention, and does Q/K carry it?"
TIERS = (design.TIER,)
COLUMNS = lra_mechanism.COLUMNS
SHEET = lra_mechanism.Sheet(NAME, "lra_claims_probes2", TITLE, 2, STATES2, (design.PRIMARY, AT_PEAK))


def specs(ctx):
    """``(task, arm, seed)`` -> the tracked twin of every second-study run at the mechanism's seeds."""
    return lra_mechanism.specs(ctx, SHEET)


def draw(ctx, runs):
    return lra_mechanism.draw(ctx, runs, SHEET)
