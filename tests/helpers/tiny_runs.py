"""Tiny trained runs of every arm of the LRA study on each of its data kinds (PathFinder pixels,
digits pixels, ListOps tokens), at 1 and 2 layers: a few optimizer steps each, for the bridge
and mechanism tests (cached for the test session)."""
from __future__ import annotations

import functools
from dataclasses import replace

import torch

from toyspt.kinds import listops as lo
from toyspt.kinds.pathfinder import PathfinderConfig
from toyspt.kinds.tasks import PIXEL_TRAIN, TOKEN_TRAIN, DigitsSource, ListOpsSource, PathfinderSource
from toyspt.nn.model import ModelConfig
from toyspt.runs.arms import arm_spec
from toyspt.runs.specs import RunSpec
from toyspt.studies.lra_design import ARMS, Task
from toyspt.train.recipes import TrainConfig

SOURCES = {
    "pathfinder": PathfinderSource(PathfinderConfig(size=8, origin_distance=3.0, contour_length=2, n_distractors=1,
                                                    distractor_length=1, dash_length=1.5), n_train=16, n_val=8,
                                   n_test=8),
    "digits": DigitsSource(side=8, n_val=900, n_test=880),  # 17 training images
    "listops": ListOpsSource(lo.ListOpsConfig(max_depth=3, max_args=4, min_len=8, max_len=24), n_train=16, n_val=8,
                             n_test=8),
}
STUDY_ARMS = ("scratch", "spt", "qk_transfer", "frozen_attention", "all_but_qk_transfer", "scratch_matched",
              "no_attention")
MODEL = ModelConfig(d_model=8, n_heads=2, d_mlp=16, max_len=64)


def task(kind: str, layers: int = 1) -> Task:
    src = SOURCES[kind]
    train = TrainConfig(epochs=2, pre_epochs=1, batch_size=8, **(TOKEN_TRAIN if kind == "listops" else PIXEL_TRAIN))
    return Task(kind, src, train, src.fit(replace(MODEL, n_layers=layers)), (0,), (0,))


@functools.lru_cache(maxsize=None)
def tiny_run(kind: str, arm: str, layers: int = 1):
    """(spec, result) of ``arm`` on the tiny ``kind`` task (seed 0)."""
    t = task(kind, layers)
    spec = arm_spec(ARMS.get(arm, arm), RunSpec("scratch", seed=0, data=t.data, model=t.model, train=t.train))
    with torch.random.fork_rng(devices=[]):
        return spec, spec.execute()
