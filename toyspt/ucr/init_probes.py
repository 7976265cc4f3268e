"""Probes of the untrained model on a UCR set, as a cache entry of their own (a :class:`Table`),
so that drawing a figure computes nothing: the training-free basin predictor of every seed
(:func:`toyspt.probe.basin.basin_predictor`, with the seconds it took) and gradient blindness
at initialisation (label vs recon |cos| of each example's score gradient with proximity and
control directions, float64). Computed on one thread, so any process computes the same bits.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from toyspt.data import directions as dr
from toyspt.nn.model import ModelConfig, build_model
from toyspt.probe.basin import basin_predictor, beta_unif, uniform_share
from toyspt.probe.engine import blindness
from toyspt.probe.losses import make_batch
from toyspt.runs.specs import FORMAT_VERSION, Spec, Table, single_thread
from toyspt.ucr.data import UCRSource
from toyspt.util.validation import config_dict

BLIND_DIRECTIONS = dr.COMPACT  # proximity (circ_*, toep_*) and controls (shifts, random)
COLUMNS = ["dataset", "probe", "seed", "direction", "loss", "value", "seconds"]


@dataclass(frozen=True)
class InitProbeSpec(Spec):
    """The init probes of one UCR set: the basin predictor at ``seeds``, blindness at the
    seed-``seeds[0]`` init on the first ``n_blind`` training series."""

    kind: ClassVar[str] = "ucr_init_probes"
    result_type: ClassVar[type] = Table

    data: UCRSource  # the set (its content hash names it)
    model: ModelConfig  # the architecture every seed initialises
    seeds: tuple[int, ...]  # seeds whose init gain is the basin predictor
    mask_rate: float = 0.5  # the SPT mask rate the predictor and the recon probe use
    n_blind: int = 32  # training series the blindness probe reads
    n_init: int | None = None  # training series the init gain reads (None: all)

    def to_dict(self) -> dict[str, Any]:
        return dict(kind=self.kind, format=FORMAT_VERSION, dataset=self.data.name, content=self.data.fingerprint(),
                    model=config_dict(self.model), seeds=list(self.seeds), mask_rate=self.mask_rate,
                    n_blind=self.n_blind, n_init=self.n_init)

    def seconds(self) -> float:
        """The init gain of each seed (on ``n_init`` series) and one blindness probe: about a second."""
        return 0.2 + 0.08 * len(self.seeds) + 0.02 * self.n_blind

    def label(self) -> str:
        return f"init probes {self.key()} ({self.data.name}, seeds {self.seeds[0]}-{self.seeds[-1]})"

    def execute(self, progress: bool = False, start=None) -> Table:
        if start is not None:
            raise ValueError(f"{self.label()}: has no parent run to continue")
        return single_thread(self._compute)

    def _compute(self) -> Table:
        d = self.data.load()
        x = d.train.x
        rows = []
        for s in self.seeds:
            t = time.perf_counter()
            value = basin_predictor(x, self.model, s, self.mask_rate, n=self.n_init or len(x))
            rows.append(dict(dataset=d.config.name, probe="basin_predictor", seed=s, value=value,
                             seconds=time.perf_counter() - t))
        batch = make_batch(x[:self.n_blind], d.train.y[:self.n_blind], self.mask_rate, seed=0)
        bl = blindness(build_model(self.model, self.seeds[0]), batch, list(BLIND_DIRECTIONS), per_example=True,
                       use_jvp=False)
        for loss, pr in (("label", bl.label), ("recon", bl.recon)):
            pe = pr.layers[0].per_example
            cos = (pe.deriv / torch.linalg.matrix_norm(pe.G)[..., None])[:, 0]  # (B, R), head 0
            rows += [dict(dataset=d.config.name, probe="blindness", seed=b, direction=name, loss=loss,
                          value=abs(cos[b, r].item())) for b in range(cos.shape[0])
                     for r, name in enumerate(pr.directions)]
        return Table(rows, dict(beta_unif=beta_unif(x, self.mask_rate), uniform_share=uniform_share(x, self.mask_rate)))


__all__ = ["InitProbeSpec", "BLIND_DIRECTIONS", "COLUMNS"]
