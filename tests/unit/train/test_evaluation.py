"""Evaluation forwards take a token budget (toyspt.train.evaluation.EVAL_TOKENS: long series in
fewer rows per forward): the logits, hence every accuracy and loss, are bitwise those of one
forward over the whole split and of the 512-row chunks evaluation used before, on the toy task
and on every UCR paper set's test split (benchmarks/bench_eval.py times the two)."""
import pytest
import torch

from toyspt.data.tasks import TaskConfig, make_task
from toyspt.nn.model import ModelConfig, build_model
from toyspt.train.evaluation import EVAL_TOKENS, eval_rows, scores
from toyspt.ucr.data import PAPER_DATASETS, UCRSource, is_available, load_ucr
from toyspt.ucr.runs import UCR_MODEL_DEFAULTS

OLD_ROWS = 512  # rows per forward before the token budget


def _logits(model, x, rows: int | None) -> torch.Tensor:
    with torch.no_grad():
        if rows is None:
            return model.classify(x)
        return torch.cat([model.classify(x[i:i + rows]) for i in range(0, len(x), rows)])


def _check(model, x, y) -> None:
    model.eval()
    budget = eval_rows(x.shape[1])
    whole = _logits(model, x, None)
    for rows in (budget, OLD_ROWS):
        assert torch.equal(_logits(model, x, rows), whole), rows
    # and what a label phase reports from them
    acc, loss = scores(lambda r: model.classify(x[r]), y, budget)
    acc_old, loss_old = scores(lambda r: model.classify(x[r]), y, OLD_ROWS)
    assert (acc, loss) == (acc_old, loss_old)


def test_toy_logits_are_unchanged_by_the_token_budget():
    data = make_task(TaskConfig(n_train=64, n_val=64, n_test=1200))
    assert eval_rows(data.test.x.shape[1]) == EVAL_TOKENS // 32 == OLD_ROWS  # the toy's chunk is the old one
    for seed in (0, 1):
        _check(build_model(ModelConfig(), seed), data.test.x, data.test.y)


@pytest.mark.parametrize("name", PAPER_DATASETS)
def test_ucr_test_split_logits_are_unchanged_by_the_token_budget(name):
    if not is_available(name):
        pytest.skip(f"{name} is not installed (the ucr-all extra)")
    data = load_ucr(name)
    model = build_model(UCRSource.of(data).fit(ModelConfig(**UCR_MODEL_DEFAULTS)), 0)
    assert eval_rows(data.length) < OLD_ROWS  # longer series: fewer rows per forward
    _check(model, data.test.x, data.test.y)


def test_a_non_positive_budget_is_refused():
    with pytest.raises(ValueError, match="eval_tokens: must be positive"):
        eval_rows(32, 0)
    assert eval_rows(10 ** 6, 16) == 1  # at least one row


def _history(test_acc, val_loss=None, val_acc=None):
    n = len(test_acc)
    val_loss = val_loss or [1.0 - 0.01 * e for e in range(n)]
    val_acc = val_acc or [0.5] * n
    return [dict(phase="pretrain", epoch=0)] + [
        dict(phase="finetune", epoch=e + 1, train_acc=0.9, val_acc=val_acc[e], test_acc=test_acc[e],
             val_loss=val_loss[e]) for e in range(n)]


@pytest.mark.parametrize("epochs,window", [(5, 1), (6, 2), (7, 2), (9, 2), (10, 2), (11, 3), (13, 3), (1, 1), (3, 1)])
def test_the_last_fifth_is_rounded_up(epochs, window):
    """mean_test_last20 averages the last ceil(epochs / 5) label epochs: test accuracies 1, 2, 4,
    8, ... (powers of two) make every window's mean a distinct value."""
    from toyspt.train.evaluation import label_summary, tail

    acc = [2.0 ** e for e in range(epochs)]
    assert tail(epochs) == window
    expected = sum(acc[-window:]) / window
    assert label_summary(_history(acc))["mean_test_last20"] == expected


def test_ties_in_validation_loss_and_accuracy_take_the_first_epoch():
    from toyspt.train.evaluation import label_summary

    s = label_summary(_history([0.1, 0.2, 0.3, 0.4, 0.5], val_loss=[0.9, 0.4, 0.6, 0.4, 0.4],
                               val_acc=[0.5, 0.7, 0.6, 0.7, 0.7]))
    assert (s["min_val_loss_epoch"], s["test_at_min_val_loss"], s["min_val_loss"]) == (2, 0.2, 0.4)
    assert (s["peak_epoch"], s["test_at_peak"], s["peak_val_acc"]) == (2, 0.2, 0.7)
