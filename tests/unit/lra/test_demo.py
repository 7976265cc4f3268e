"""The demo's training goes through the one loop (toyspt.train.loop.Lockstep) and is, bitwise,
what torch's per-parameter AdamW gives when the same LRA model sees the same data order, masks
and losses: the loop changed no number of the demo."""
from dataclasses import replace

import pytest
import torch

from toyspt.lra import demo
from toyspt.lra.model import build_lra

CFG = replace(demo.DemoConfig.quick(), n_train=96, n_val=40, epochs=2, weight_decay=0.01)


def _textbook(model, data, cfg, seed, spt):
    """One phase the textbook way: AdamW over the model's parameters, zero_grad / backward / step;
    a batch without a masked token is skipped, as the demo skips it."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(seed)
    n = len(data["y"])
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, cfg.batch_size):
            rows = perm[i:i + cfg.batch_size]
            loss = demo._spt_loss(model, data, rows, cfg.p_mask, g) if spt else demo._classify_loss(model, data, rows)
            if loss is None:
                continue
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.state_dict()


@pytest.mark.parametrize("spt", [False, True])
def test_a_phase_through_the_one_loop_is_the_textbook_optimizer(spt):
    train, _, vocab = demo._data(CFG, 0)
    mcfg, pcfg = demo._model_configs(CFG, len(vocab))
    cfg = pcfg if spt else mcfg
    got = build_lra(cfg, 3)
    history = demo.train_phase(got, train, CFG, 3, spt=spt)
    want = _textbook(build_lra(cfg, 3), train, CFG, 3, spt)
    assert len(history) == CFG.epochs
    for name, value in want.items():
        assert torch.equal(value, got.state_dict()[name]), name
    # the phase's parameters own their storage again (not views of the loop's flat buffer)
    assert all(p.data.untyped_storage().nbytes() == p.numel() * p.element_size() for p in got.parameters())
