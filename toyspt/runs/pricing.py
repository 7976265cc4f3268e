"""What a training run costs on the reference machine (a 2-core CPU machine of the usual cloud
kind, one thread): ``RunSpec.seconds``, the prior of the cost model (:mod:`toyspt.runs.costs`).

A run's own phases' optimizer steps (a fixed cost per step, which dominates small batches,
plus the matrix products of its tokens), the evaluations its policy makes (every split every
epoch, or validation and what ``peak`` adds: long test splits cost in proportion to their
length), and each tracker's records, priced by the tracker itself
(:func:`toyspt.probe.tracking.tracker_price`).
"""
from __future__ import annotations

import functools

from toyspt.data.source import DataSource

# the reference machine, one thread (benchmarks/bench_flops.py: a default toy step is 177 MFLOP
# in 4.47 ms, of which ~1.4 ms is the fixed per-operation cost)
FLOPS = 57e9  # float32 multiply-adds x 2 per second in a step's matrix products
STEP_FIXED = 1.4e-3  # seconds per optimizer step outside the arithmetic, per layer
FORWARD_FIXED = 0.3e-3  # seconds per evaluation forward outside the arithmetic
EPOCH_FIXED = 2e-3  # seconds per epoch (permutation, bookkeeping)
RUN_FIXED = 0.05  # seconds per run (model, optimizer, data at hand)
EVAL_TOKENS = 512 * 32  # tokens per evaluation forward (toyspt.train.evaluation.EVAL_TOKENS)


@functools.lru_cache(maxsize=256)
def data_shape(data: DataSource) -> tuple[int, int, int, int]:
    """(training, validation, test examples, positions per example) of a data source (loaded
    once per process)."""
    d = data.load()
    return len(d.train), len(d.val), len(d.test), int(d.train.x.shape[1])


def _flops_per_token(spec, T: int) -> float:
    """Forward multiply-adds x 2 per token of the model (attention projections, scores, MLP)."""
    m = spec.model
    return 2.0 * m.n_layers * (4 * m.d_model ** 2 + 2 * m.d_model * m.d_mlp + 2 * T * m.d_model)


def _forwards(rows: int, T: int) -> int:
    """Evaluation forwards over ``rows`` sequences of ``T`` positions (the token budget per forward)."""
    per = max(1, EVAL_TOKENS // max(1, T))
    return -(-rows // per) if rows else 0


def run_seconds(spec) -> float:
    """Seconds of ``spec``'s own phases (a continued run: what it adds), its evaluations and its
    trackers' records on the reference machine (``RunSpec.seconds``); each tracker prices its own
    records (:func:`toyspt.probe.tracking.tracker_price`)."""
    from toyspt.probe.tracking import tracker_price

    rec = spec.rec
    n, n_val, n_test, T = data_shape(spec.data)
    parent = spec.parent()
    tr = spec.train
    pre = tr.pre_epochs if rec.pretrains and parent is None else 0
    label = rec.label_epochs(tr) - (parent.rec.label_epochs(tr) if parent is not None else 0)
    steps_per_epoch = -(-n // tr.batch_size)
    fwd = _flops_per_token(spec, T)
    step = STEP_FIXED * spec.model.n_layers + 3 * fwd * min(tr.batch_size, n) * T / FLOPS
    seconds = RUN_FIXED + (pre + label) * (steps_per_epoch * step + EPOCH_FIXED)

    def evaluate(rows: int) -> float:
        return _forwards(rows, T) * FORWARD_FIXED + fwd * rows * T / FLOPS

    seconds += pre * evaluate(n_val)  # the SPT phase's validation loss
    if label:
        if spec.evaluate == "all":
            seconds += label * evaluate(n + n_val + n_test)
        else:  # validation every epoch; test where it peaks, in the last fifth, at the end; train at the end
            share = min(1.0, 0.2 + 6.0 / label)
            seconds += label * evaluate(n_val) + label * share * evaluate(n_test) + 2 * evaluate(n)
    spt_epochs = tr.pre_epochs if rec.pretrains else 0
    epochs = spt_epochs + rec.label_epochs(tr)
    for name in spec.trackers:
        records, fixed, rows = tracker_price(name, n_train=n, n_val=n_val, steps=epochs * steps_per_epoch,
                                             epochs=epochs, spt_epochs=spt_epochs)
        seconds += records * (fixed + fwd * rows * T / FLOPS)
    return seconds


__all__ = ["run_seconds", "data_shape", "FLOPS"]
