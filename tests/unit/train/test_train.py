import pytest
import torch

from toyspt.data.tasks import Split, TaskConfig, TaskData, make_task
from toyspt.nn.model import ModelConfig, build_model, group_param_names, head_param_names, qk_param_names
from toyspt.train.config import RunConfig
from toyspt.train.recipes import RECIPES, TrainConfig, get_recipe
from toyspt.train.run import run_recipe

TINY = TrainConfig(epochs=2, pre_epochs=2, batch_size=32, swap_epochs=1)


def _params(state):
    return {k: v for k, v in state.items() if k != "pe.table"}


def test_same_seed_same_history(small_data):
    a = run_recipe(RunConfig("spt", train=TINY), small_data, 1)
    b = run_recipe(RunConfig("spt", train=TINY), small_data, 1)
    assert a.history == b.history
    for k in a.states["final"]:
        assert torch.equal(a.states["final"][k], b.states["final"][k])
    c = run_recipe(RunConfig("spt", train=TINY), small_data, 2)
    assert c.history != a.history


GROUP_RECIPES = {"qk_transfer": "qk", "vo_transfer": "vo", "embed_transfer": "embed", "mlp_transfer": "mlp",
                 "norm_transfer": "norm"}


@pytest.mark.parametrize("recipe", ["spt", "all_but_qk_transfer", *GROUP_RECIPES])
def test_transfer_recipes_take_exactly_what_they_claim(small_data, recipe):
    """Right after the transfer (0 label epochs are not allowed, so check the transfer map
    and reproduce it): every tensor equals the SPT weights or the seed's init, as claimed."""
    res = run_recipe(RunConfig(recipe, train=TINY), small_data, 0)
    model = build_model(ModelConfig(), 0)
    names = get_recipe(recipe).transferred(model)
    qk, heads = set(qk_param_names(model)), set(head_param_names(model))
    every = [n for n, _ in model.named_parameters()]
    expected = {"spt": [n for n in every if n not in heads],
                "qk_transfer": [n for n in every if n in qk],
                "vo_transfer": [n for n in every if ".attn.W_V." in n or ".attn.W_O." in n],
                "embed_transfer": ["embed.weight", "embed.bias"],  # sinusoidal PE: a fixed table, no parameter
                "mlp_transfer": [n for n in every if ".mlp." in n],
                "norm_transfer": [n for n in every if ".ln1." in n or ".ln2." in n or n.startswith("ln_f.")],
                "all_but_qk_transfer": [n for n in every if n not in qk and n not in heads]}[recipe]
    assert names == expected and names
    # the pretrained weights differ from init for every transferred tensor, so the transfer matters
    init, pre = res.states["init"], res.states["pretrained"]
    for n in names:
        assert not torch.equal(init[n], pre[n]), n


def test_transfer_state_is_exact(small_data, monkeypatch):
    """Capture the model at the start of fine-tuning and compare every tensor."""
    import toyspt.train.run as tr

    seen = {}
    real = tr.finetune

    def spy(lock, *a, **k):
        seen["state"] = {n: v.clone() for n, v in lock.ctxs[0].model.state_dict().items()}
        return real(lock, *a, **k)

    monkeypatch.setattr(tr, "finetune", spy)
    for recipe in ("spt", "all_but_qk_transfer", *GROUP_RECIPES):
        res = tr.run_recipe(RunConfig(recipe, train=TINY), small_data, 0)
        init, pre, start = res.states["init"], res.states["pretrained"], seen["state"]
        names = set(get_recipe(recipe).transferred(tr.build_model(ModelConfig(), 0)))
        for n, v in start.items():
            src = pre if n in names else init
            assert torch.equal(v, src[n]), (recipe, n)


def test_weight_groups_partition_the_non_head_parameters():
    """qk, vo, embed, mlp and norm cover every parameter but the heads exactly once (a learned
    table belongs to embed; FIRE's bias MLP to no group, not to mlp)."""
    for cfg in (ModelConfig(pos="learned", n_layers=2), ModelConfig(pos="fire")):
        model = build_model(cfg, 0)
        groups = [group_param_names(model, g) for g in ("qk", "vo", "embed", "mlp", "norm")]
        flat = [n for g in groups for n in g]
        assert len(flat) == len(set(flat))
        rest = {n for n, _ in model.named_parameters()} - set(flat) - set(head_param_names(model))
        assert rest == ({"pos_bias.log_c", "pos_bias.L", "pos_bias.mlp.0.weight", "pos_bias.mlp.0.bias",
                         "pos_bias.mlp.2.weight", "pos_bias.mlp.2.bias"} if cfg.pos == "fire" else set())
    with pytest.raises(ValueError, match="weight group"):
        group_param_names(build_model(ModelConfig(), 0), "attention")


@pytest.mark.parametrize("recipe,model,why", [
    ("mlp_transfer", ModelConfig(d_mlp=0), "no MLP"),
    ("embed_transfer", ModelConfig(pos="fire"), "no positional table"),
    ("embed_transfer", ModelConfig(pos="alibi"), "no positional table"),
])
def test_a_group_the_model_lacks_is_refused_by_name(small_data, recipe, model, why):
    from toyspt.runs import RunSpec

    with pytest.raises(ValueError, match=f"{recipe} transfers weight group .*{why}"):
        run_recipe(RunConfig(recipe, model, TINY), small_data, 0)
    with pytest.raises(ValueError, match=f"{recipe} transfers weight group .*{why}"):
        RunSpec(recipe, model=model)  # refused when the spec is made, before any training


def _label_start(small_data, monkeypatch, recipe, seed=0):
    """(the run, the model's state at the start of its label phase)."""
    import toyspt.train.run as tr

    seen, real = {}, tr.finetune

    def spy(lock, *a, **k):
        seen["state"] = {n: v.clone() for n, v in lock.ctxs[0].model.state_dict().items()}
        return real(lock, *a, **k)

    monkeypatch.setattr(tr, "finetune", spy)
    return tr.run_recipe(RunConfig(recipe, train=TINY), small_data, seed), seen["state"]


def test_spt_norms_has_spt_scale_and_init_directions(small_data, monkeypatch):
    res, start = _label_start(small_data, monkeypatch, "spt_norms")
    init, pre = res.states["init"], res.states["pretrained"]
    names = get_recipe("spt_norms").transferred(build_model(ModelConfig(), 0))
    eps = torch.finfo(torch.float32).eps
    zero_init = 0
    for n, v in start.items():
        if n not in names:
            assert torch.equal(v, init[n]), n
            continue
        # the norm is SPT's up to a few roundings per entry (a rescale: one product, one norm)
        assert abs(v.norm() - pre[n].norm()) <= 4 * eps * pre[n].norm() * max(1.0, v.numel() ** 0.5), n
        if init[n].norm() > 0:  # the direction is the init's
            cos = torch.nn.functional.cosine_similarity(v.reshape(-1), init[n].reshape(-1), dim=0)
            assert 1 - cos <= 8 * eps, n
        else:
            zero_init += 1
            assert (v != 0).all(), n  # a Gaussian direction, not zeros
    assert zero_init > 0  # biases of W_Q, W_K, W_V, W_O start at zero: the Gaussian branch is exercised
    assert not torch.equal(start["blocks.0.attn.W_Q.weight"], pre["blocks.0.attn.W_Q.weight"])


def test_spt_permuted_has_spt_values_in_another_order(small_data, monkeypatch):
    res, start = _label_start(small_data, monkeypatch, "spt_permuted")
    init, pre = res.states["init"], res.states["pretrained"]
    names = get_recipe("spt_permuted").transferred(build_model(ModelConfig(), 0))
    for n, v in start.items():
        if n not in names:
            assert torch.equal(v, init[n]), n
            continue
        assert torch.equal(v.reshape(-1).sort().values, pre[n].reshape(-1).sort().values), n
        if pre[n].unique().numel() > 1:
            assert not torch.equal(v, pre[n]), n
    # the permutation draws from a generator of its own: the SPT phase is spt's, batch for batch
    spt = run_recipe(RunConfig("spt", train=TINY), small_data, 0)
    assert [h for h in spt.history if h["phase"] == "pretrain"] == \
        [h for h in res.history if h["phase"] == "pretrain"]


def test_frozen_attention_keeps_qk_at_init(small_data):
    res = run_recipe(RunConfig("frozen_attention", train=TINY), small_data, 0)
    init, final = res.states["init"], res.states["final"]
    for n in init:
        if ".attn.W_Q." in n or ".attn.W_K." in n:
            assert torch.equal(init[n], final[n]), n
    assert not torch.equal(init["blocks.0.attn.W_V.weight"], final["blocks.0.attn.W_V.weight"])


def test_scratch_matched_trains_longer(small_data):
    res = run_recipe(RunConfig("scratch_matched", train=TINY), small_data, 0)
    assert [h["epoch"] for h in res.history] == [1, 2, 3, 4]
    assert "pretrained" not in res.states


def test_data_swap_pretrains_on_the_other_data(small_data):
    other = make_task(TaskConfig(family="freq_band", T=16, n_train=64, n_val=16, n_test=16, seed=9))
    with pytest.raises(ValueError, match="pretrain_data"):
        run_recipe(RunConfig("data_swap", train=TINY), small_data)
    res = run_recipe(RunConfig("data_swap", train=TINY), small_data, pretrain_data=other)
    ref = run_recipe(RunConfig("spt", train=TINY), small_data)
    assert not torch.equal(res.states["pretrained"]["embed.weight"], ref.states["pretrained"]["embed.weight"])


def _content_task(n, seed):
    """Labels readable from token content through mean pooling: sign of the mean of x[..., 0]."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, 2, generator=g)
    return Split(x, (x[..., 0].mean(1) > 0).long())


def test_short_training_learns():
    tr, va, te = (_content_task(n, s) for n, s in ((256, 0), (64, 1), (64, 2)))
    data = TaskData(TaskConfig(T=16), tr, va, te, torch.zeros(2), torch.ones(2))
    res = run_recipe(RunConfig("scratch", train=TrainConfig(epochs=6, batch_size=32, lr=3e-3)), data)
    losses = [h["train_loss"] for h in res.history]
    assert losses[-1] < 0.8 * losses[0]
    assert res.summary["final_train_acc"] > 0.7


def test_spt_phase_reduces_reconstruction_loss(small_data):
    res = run_recipe(RunConfig("spt", train=TrainConfig(epochs=1, pre_epochs=4, batch_size=32, lr=3e-3)), small_data)
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
    res = run_recipe(RunConfig("spt", train=TINY), small_data, callbacks=[cb])
    assert cb.phases == ["pretrain", "finetune"]
    assert cb.epochs == [("pretrain", 1), ("pretrain", 2), ("finetune", 1), ("finetune", 2)]
    assert cb.steps == 4 * 4 == len(res.records)  # 128 / 32 = 4 steps per epoch
    assert set(res.records[0]) >= {"recipe", "seed", "phase", "step", "epoch", "name", "metric", "value"}


def test_sgd_option_and_summary(small_data):
    res = run_recipe(RunConfig("scratch", train=TrainConfig(epochs=2, optimizer="sgd", lr=0.05)), small_data)
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
        run_recipe(RunConfig("scratch", ModelConfig(d_in=3), TINY), small_data)


def test_all_recipes_listed():
    assert set(RECIPES) == {"scratch", "spt", "scratch_matched", "qk_transfer", "all_but_qk_transfer",
                            "vo_transfer", "embed_transfer", "mlp_transfer", "norm_transfer", "spt_norms",
                            "spt_permuted", "frozen_attention", "data_swap", "spt_only", "spt_swap_start"}


def _same_states(a, b):
    assert list(a) == list(b)
    return all(torch.equal(a[k], b[k]) for k in a)


def test_spt_only_is_exactly_the_spt_phase_of_spt(small_data):
    only = run_recipe(RunConfig("spt_only", train=TINY), small_data, 3)
    full = run_recipe(RunConfig("spt", train=TINY), small_data, 3)
    assert [h["phase"] for h in only.history] == ["pretrain"] * TINY.pre_epochs
    assert only.history == [h for h in full.history if h["phase"] == "pretrain"]
    assert _same_states(only.states["pretrained"], full.states["pretrained"])
    assert _same_states(only.states["final"], only.states["pretrained"])
    assert only.summary["final_recon_val_loss"] == full.history[TINY.pre_epochs - 1]["val_loss"]


def test_spt_swap_start(small_data):
    from dataclasses import replace

    other = make_task(replace(small_data.config, offset=small_data.config.offset + 0.5))  # other data
    with pytest.raises(ValueError, match="pretrain_data"):
        run_recipe(RunConfig("spt_swap_start", train=TINY), small_data)
    with pytest.raises(ValueError, match="swap_epochs=3 exceeds pre_epochs=2"):
        run_recipe(RunConfig("spt_swap_start", train=replace(TINY, swap_epochs=3)), small_data, pretrain_data=other)
    # no swap epochs: exactly spt (the other data set is never touched)
    zero = run_recipe(RunConfig("spt_swap_start", train=replace(TINY, swap_epochs=0)), small_data, pretrain_data=other)
    spt = run_recipe(RunConfig("spt", train=TINY), small_data)
    assert zero.history == spt.history and _same_states(zero.states["final"], spt.states["final"])
    # one swap epoch: the first SPT epoch saw the other data, so the weights differ from spt's
    one = run_recipe(RunConfig("spt_swap_start", train=TINY), small_data, pretrain_data=other)
    assert not _same_states(one.states["pretrained"], spt.states["pretrained"])
    assert len([h for h in one.history if h["phase"] == "pretrain"]) == TINY.pre_epochs
