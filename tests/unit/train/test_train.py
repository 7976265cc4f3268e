import pytest
import torch

from toyspt.nn.model import ModelConfig, build_model, head_param_names, qk_param_names
from toyspt.data.tasks import Split, TaskConfig, TaskData, make_task
from toyspt.train.recipes import RECIPES, TrainConfig, get_recipe
from toyspt.train.loop import run_recipe

TINY = TrainConfig(epochs=2, pre_epochs=2, batch_size=32, swap_epochs=1)


def _params(state):
    return {k: v for k, v in state.items() if k != "pe.table"}


def test_same_seed_same_history(small_data):
    a = run_recipe("spt", small_data, train_cfg=TINY, seed=1)
    b = run_recipe("spt", small_data, train_cfg=TINY, seed=1)
    assert a.history == b.history
    for k in a.states["final"]:
        assert torch.equal(a.states["final"][k], b.states["final"][k])
    c = run_recipe("spt", small_data, train_cfg=TINY, seed=2)
    assert c.history != a.history


@pytest.mark.parametrize("recipe", ["spt", "qk_transfer", "all_but_qk_transfer"])
def test_transfer_recipes_take_exactly_what_they_claim(small_data, recipe):
    """Right after the transfer (0 label epochs are not allowed, so check the transfer map
    and reproduce it): every tensor equals the SPT weights or the seed's init, as claimed."""
    res = run_recipe(recipe, small_data, train_cfg=TINY, seed=0)
    model = build_model(ModelConfig(), 0)
    names = get_recipe(recipe).transferred(model)
    qk, heads = set(qk_param_names(model)), set(head_param_names(model))
    every = [n for n, _ in model.named_parameters()]
    expected = {"spt": [n for n in every if n not in heads],
                "qk_transfer": [n for n in every if n in qk],
                "all_but_qk_transfer": [n for n in every if n not in qk and n not in heads]}[recipe]
    assert names == expected
    # the pretrained weights differ from init for every transferred tensor, so the transfer matters
    init, pre = res.states["init"], res.states["pretrained"]
    for n in names:
        assert not torch.equal(init[n], pre[n]), n


def test_transfer_state_is_exact(small_data, monkeypatch):
    """Capture the model at the start of fine-tuning and compare every tensor."""
    import toyspt.train.loop as tr

    seen = {}
    real = tr.finetune

    def spy(lock, *a, **k):
        seen["state"] = {n: v.clone() for n, v in lock.ctxs[0].model.state_dict().items()}
        return real(lock, *a, **k)

    monkeypatch.setattr(tr, "finetune", spy)
    for recipe in ("spt", "qk_transfer", "all_but_qk_transfer"):
        res = tr.run_recipe(recipe, small_data, train_cfg=TINY, seed=0)
        init, pre, start = res.states["init"], res.states["pretrained"], seen["state"]
        names = set(get_recipe(recipe).transferred(tr.build_model(ModelConfig(), 0)))
        for n, v in start.items():
            src = pre if n in names else init
            assert torch.equal(v, src[n]), (recipe, n)


def test_frozen_attention_keeps_qk_at_init(small_data):
    res = run_recipe("frozen_attention", small_data, train_cfg=TINY, seed=0)
    init, final = res.states["init"], res.states["final"]
    for n in init:
        if ".attn.W_Q." in n or ".attn.W_K." in n:
            assert torch.equal(init[n], final[n]), n
    assert not torch.equal(init["blocks.0.attn.W_V.weight"], final["blocks.0.attn.W_V.weight"])


def test_scratch_matched_trains_longer(small_data):
    res = run_recipe("scratch_matched", small_data, train_cfg=TINY, seed=0)
    assert [h["epoch"] for h in res.history] == [1, 2, 3, 4]
    assert "pretrained" not in res.states


def test_data_swap_pretrains_on_the_other_data(small_data):
    other = make_task(TaskConfig(family="freq_band", T=16, n_train=64, n_val=16, n_test=16, seed=9))
    with pytest.raises(ValueError, match="pretrain_data"):
        run_recipe("data_swap", small_data, train_cfg=TINY)
    res = run_recipe("data_swap", small_data, train_cfg=TINY, pretrain_data=other)
    ref = run_recipe("spt", small_data, train_cfg=TINY)
    assert not torch.equal(res.states["pretrained"]["embed.weight"], ref.states["pretrained"]["embed.weight"])


def _content_task(n, seed):
    """Labels readable from token content through mean pooling: sign of the mean of x[..., 0]."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, 2, generator=g)
    return Split(x, (x[..., 0].mean(1) > 0).long())


def test_short_training_learns():
    tr, va, te = (_content_task(n, s) for n, s in ((256, 0), (64, 1), (64, 2)))
    data = TaskData(TaskConfig(T=16), tr, va, te, torch.zeros(2), torch.ones(2))
    res = run_recipe("scratch", data, train_cfg=TrainConfig(epochs=6, batch_size=32, lr=3e-3))
    losses = [h["train_loss"] for h in res.history]
    assert losses[-1] < 0.8 * losses[0]
    assert res.summary["final_train_acc"] > 0.7


def test_spt_phase_reduces_reconstruction_loss(small_data):
    res = run_recipe("spt", small_data, train_cfg=TrainConfig(epochs=1, pre_epochs=4, batch_size=32, lr=3e-3))
    pre = [h["train_loss"] for h in res.history if h["phase"] == "pretrain"]
    assert pre[-1] < pre[0]


def test_callbacks_see_every_step_and_epoch(small_data):
    class Count:
        def __init__(self):
            self.steps, self.epochs, self.phases = 0, [], []

        def on_phase_start(self, ctx):
            self.phases.append(ctx.phase)

        def on_step(self, ctx, loss):
            self.steps += 1
            ctx.record("loss", "value", loss)

        def on_epoch(self, ctx, rec):
            self.epochs.append((ctx.phase, ctx.epoch))

    cb = Count()
    res = run_recipe("spt", small_data, train_cfg=TINY, callbacks=[cb])
    assert cb.phases == ["pretrain", "finetune"]
    assert cb.epochs == [("pretrain", 1), ("pretrain", 2), ("finetune", 1), ("finetune", 2)]
    assert cb.steps == 4 * 4 == len(res.records)  # 128 / 32 = 4 steps per epoch
    assert set(res.records[0]) >= {"recipe", "seed", "phase", "step", "epoch", "name", "metric", "value"}


def test_sgd_option_and_summary(small_data):
    res = run_recipe("scratch", small_data, train_cfg=TrainConfig(epochs=2, optimizer="sgd", lr=0.05))
    s = res.summary
    assert 0 <= s["test_at_peak"] <= 1 and s["peak_epoch"] in (1, 2)
    best = max(res.history, key=lambda h: h["val_acc"])
    assert s["test_at_peak"] == best["test_acc"]


@pytest.mark.parametrize("kw,field", [
    (dict(epochs=0), "epochs"), (dict(batch_size=0), "batch_size"), (dict(pre_epochs=-1), "pre_epochs"),
    (dict(lr=0.0), "lr"), (dict(optimizer="adam"), "optimizer"), (dict(mask_rate=0.0), "mask_rate"),
    (dict(recon="huber"), "recon"), (dict(spt_attention="local"), "spt_attention"),
])
def test_invalid_train_configs(kw, field):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**kw)


def test_unknown_recipe_and_feature_mismatch(small_data):
    with pytest.raises(ValueError, match="recipe"):
        run_recipe("finetune_only", small_data)
    with pytest.raises(ValueError, match="d_in"):
        run_recipe("scratch", small_data, model_cfg=ModelConfig(d_in=3), train_cfg=TINY)


def test_all_recipes_listed():
    assert set(RECIPES) == {"scratch", "spt", "scratch_matched", "qk_transfer", "all_but_qk_transfer",
                            "frozen_attention", "data_swap", "spt_only", "spt_swap_start"}


def _same_states(a, b):
    assert list(a) == list(b)
    return all(torch.equal(a[k], b[k]) for k in a)


def test_spt_only_is_exactly_the_spt_phase_of_spt(small_data):
    only = run_recipe("spt_only", small_data, train_cfg=TINY, seed=3)
    full = run_recipe("spt", small_data, train_cfg=TINY, seed=3)
    assert [h["phase"] for h in only.history] == ["pretrain"] * TINY.pre_epochs
    assert only.history == [h for h in full.history if h["phase"] == "pretrain"]
    assert _same_states(only.states["pretrained"], full.states["pretrained"])
    assert _same_states(only.states["final"], only.states["pretrained"])
    assert only.summary["final_recon_val_loss"] == full.history[TINY.pre_epochs - 1]["val_loss"]


def test_spt_swap_start(small_data):
    from dataclasses import replace

    other = make_task(replace(small_data.config, offset=small_data.config.offset + 0.5))  # other data
    with pytest.raises(ValueError, match="pretrain_data"):
        run_recipe("spt_swap_start", small_data, train_cfg=TINY)
    with pytest.raises(ValueError, match="swap_epochs=3 exceeds pre_epochs=2"):
        run_recipe("spt_swap_start", small_data, train_cfg=replace(TINY, swap_epochs=3), pretrain_data=other)
    # no swap epochs: exactly spt (the other data set is never touched)
    zero = run_recipe("spt_swap_start", small_data, train_cfg=replace(TINY, swap_epochs=0), pretrain_data=other)
    spt = run_recipe("spt", small_data, train_cfg=TINY)
    assert zero.history == spt.history and _same_states(zero.states["final"], spt.states["final"])
    # one swap epoch: the first SPT epoch saw the other data, so the weights differ from spt's
    one = run_recipe("spt_swap_start", small_data, train_cfg=TINY, pretrain_data=other)
    assert not _same_states(one.states["pretrained"], spt.states["pretrained"])
    assert len([h for h in one.history if h["phase"] == "pretrain"]) == TINY.pre_epochs
