"""Gates: each one passes where the runs show what a verdict needs and fails where they do not,
and a failed gate turns any verdict into "not tested"."""
import math

import pytest

from toyspt.analysis import gates as g


def test_treatment_needs_spt_losses_below_the_constant_across_seeds():
    assert g.treatment([0.37, 0.38, 0.36, 0.39, 0.37, 0.38], 0.61).passed  # digits: well below
    first_study_pathfinder = [0.173, 0.172, 0.174, 0.171, 0.175, 0.173]  # above the background's 0.169
    assert not g.treatment(first_study_pathfinder, 0.169).passed
    assert not g.treatment([0.10, 0.12, 0.11], 0.5).passed  # 3 seeds: the exact test's smallest p is 1/8
    assert not g.treatment([], 0.5).passed and not g.treatment([math.nan, 0.1], 0.5).passed


def test_learnable_is_an_exact_mcnemar_against_the_majority_class():
    assert g.learnable_mcnemar(60, 30).passed  # p = P(Bin(90, 1/2) >= 60) ~ 0.0011
    assert not g.learnable_mcnemar(52, 48).passed
    assert not g.learnable_mcnemar(0, 0).passed  # never different from the majority answer


def test_above_chance_takes_the_lower_end_of_the_interval():
    assert g.above("off chance", [0.60, 0.62, 0.58, 0.61], 0.5, "scratch").passed
    assert not g.above("off chance", [0.50, 0.55, 0.47, 0.52], 0.5, "scratch").passed  # mean above, interval not
    assert g.above("learnable", [0.9], 0.5, "cnn").passed and not g.above("learnable", [0.5], 0.5, "cnn").passed


def test_trained_out_needs_every_run_stopped_by_its_rule():
    assert g.trained_out([True] * 10, "spt, scratch").passed
    out = g.trained_out([True] * 9 + [False], "spt, scratch")
    assert not out.passed and "1 of 10" in out.detail
    assert not g.trained_out([], "none").passed


def test_budget_needs_the_gain_against_scratch_at_spts_budget_too():
    assert g.budget(+1, 0.01).passed
    assert not g.budget(+1, 0.2).passed and not g.budget(-1, 0.001).passed


def test_margin_is_at_least_twice_one_evaluations_standard_error():
    assert not g.margin(0.02, 500).passed  # the first study: 2 * sqrt(0.25 / 500) = 0.045
    assert g.margin(0.025, 2000).passed  # 2 * sqrt(0.25 / 2000) = 0.0224
    assert g.eval_se(2000) == pytest.approx(0.01118, abs=1e-5)


def test_a_failed_gate_makes_any_verdict_not_tested_in_gate_order():
    ok, bad1, bad2 = g.Gate("learnable", True, ""), g.Gate("trained out", False, ""), g.Gate("treatment", False, "")
    assert g.gated("confirmed", [ok]) == "confirmed"
    assert g.gated("equivalent within the margin", [ok, bad1, bad2]) == "not tested: treatment, trained out"


def test_below_half_the_papers_gain():
    small = [0.01, 0.02, 0.0, 0.015, 0.005, 0.01]
    assert g.below_fraction_p(small, 0.18) < 0.001
    assert g.below_fraction_p([0.2, 0.25, 0.19, 0.22], 0.18) > 0.5
    assert math.isnan(g.below_fraction_p(small, -0.17)) and math.isnan(g.below_fraction_p([0.1], 0.18))


def test_which_gates_a_claim_needs():
    assert g.needed("spt", "confirmed", 1) == ("treatment", "learnable", "trained out", "budget")
    assert g.needed("frozen_attention", "equivalent within the margin", 0) == (
        "learnable", "off chance", "trained out", "margin")
    assert g.needed("qk_transfer", "not resolved", 1) == ("treatment", "learnable", "off chance", "trained out")
