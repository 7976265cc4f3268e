"""The ``vmap`` engine of :mod:`toyspt.train.lockstep`: K copies of one architecture with
parameters stacked (K, ...) and one batched forward for all seeds (see that module's
docstring for when it wins and how close it is to one run at a time)."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from toyspt.nn.model import ModelConfig, build_model
from toyspt.train.recipes import make_optimizer
from toyspt.train.loop import TrainConfig

# sequences per evaluation forward: a (512, 32, 128) MLP activation (8 MB) is about the
# largest that stays fast here; run_recipe's 2048 runs ~2x slower per sequence (measured).
# Rows of a matrix product do not depend on how many rows are in the call, so chunking
# does not change the logits (the lockstep test checks the accuracies bit for bit).
EVAL_CHUNK = 512


class _Forward(nn.Module):
    """Lets functional_call reach both entry points of the model."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, mask=None, attend="all"):
        return self.model.classify(x) if mask is None else self.model.reconstruct(x, mask, attend)


class Stacked:
    """K copies of one architecture with parameters stacked (K, ...), run through vmap."""

    def __init__(self, cfg: ModelConfig, states: Sequence[dict[str, torch.Tensor]]):
        base = build_model(cfg, 0)
        self.fwd = _Forward(base)
        self.keys = list(states[0])  # state_dict order
        self.buffers = {n: b for n, b in base.named_buffers()}
        for n, b in self.buffers.items():  # buffers come from the config, never from a seed
            if any(not torch.equal(s[n], b) for s in states):
                raise ValueError(f"buffer {n!r} differs between the stacked states")
        self.params = {n: nn.Parameter(torch.stack([s[n] for s in states])) for n, _ in base.named_parameters()}
        self.K = len(states)

    def freeze(self, names) -> None:
        for n, p in self.params.items():
            p.requires_grad_(n not in names)

    def start_phase(self, cfg: TrainConfig, lr: float, opt_states=None) -> None:
        # parameters the loss does not reach keep grad None, and the optimizer skips them
        self.opt = make_optimizer([p for p in self.params.values() if p.requires_grad], cfg, lr)
        for n, p in self.params.items() if opt_states is not None else ():
            slots = dict.fromkeys(key.split("/", 1)[1] for key in opt_states[0] if key.split("/", 1)[0] == n)
            self.opt.state[p] = {sl: opt_states[0][f"{n}/{sl}"].clone() if sl == "step" else
                                 torch.stack([st[f"{n}/{sl}"] for st in opt_states]) for sl in slots}

    def opt_state(self, k: int) -> dict[str, torch.Tensor]:
        return {f"{n}/{sl}": (t.clone() if t.dim() == 0 else t[k].clone())
                for n, p in self.params.items() for sl, t in self.opt.state.get(p, {}).items()}

    def _call(self, p, x, mask=None, attend="all"):
        full = {f"model.{n}": v for n, v in p.items()}
        full.update({f"model.{n}": b for n, b in self.buffers.items()})
        return functional_call(self.fwd, full, (x, mask, attend))

    def classify(self, x_KxBxTxD):
        return vmap(self._call)(self.params, x_KxBxTxD)

    def reconstruct(self, x_KxBxTxD, mask_KxBxT, attend: str):
        return vmap(lambda p, x, m: self._call(p, x, m, attend))(self.params, x_KxBxTxD, mask_KxBxT)

    def label_step(self, x, y, idx, check) -> list[float]:
        i = torch.stack(idx)
        loss = F.cross_entropy(self.classify(x[i]).flatten(0, 1), y[i].flatten(), reduction="none")
        return self._step(loss.view(self.K, -1).mean(1), check)

    def recon_step(self, x, idx, masks, attend, kind, check) -> list[float]:
        xb, mb = x[torch.stack(idx)], torch.stack(masks)
        return self._step(_recon_loss_K(self.reconstruct(xb, mb, attend), xb, mb, kind), check)

    def _step(self, loss_K, check) -> list[float]:
        values = loss_K.tolist()
        for k, v in enumerate(values):
            check(k, v)
        self.opt.zero_grad(set_to_none=True)
        loss_K.sum().backward()  # d(sum)/d(params of seed k) = d(loss_k)/d(params of seed k)
        self.opt.step()
        return values

    @torch.no_grad()
    def correct(self, x, y, chunk: int = EVAL_CHUNK, only=None) -> list[int]:
        if only is not None:  # one batched pass for all seeds is what vmap does; keep the asked
            c = self.correct(x, y, chunk)
            return [c[k] for k in only]
        c = torch.zeros(self.K, dtype=torch.long)
        per = max(1, chunk // self.K)  # keep the batched activations cache-sized
        for i in range(0, len(y), per):
            xb = x[i:i + per]
            c += (self.classify(xb.expand(self.K, *xb.shape)).argmax(-1) == y[i:i + per]).sum(-1)
        return c.tolist()

    @torch.no_grad()
    def val_recon(self, x, masks, attend, kind) -> list[float]:
        xb, mb = x.expand(self.K, *x.shape), torch.stack(list(masks))
        return _recon_loss_K(self.reconstruct(xb, mb, attend), xb, mb, kind).tolist()

    def state(self, k: int) -> dict[str, torch.Tensor]:
        return {n: (self.params[n][k] if n in self.params else self.buffers[n]).detach().clone()
                for n in self.keys}


def _recon_loss_K(pred, x, mask, kind: str) -> torch.Tensor:
    """toyspt.data.tasks.recon_loss of each seed: (K,) means over masked entries."""
    err = (pred - x).abs() if kind == "l1" else (pred - x).pow(2)
    m = mask.to(err.dtype).unsqueeze(-1)
    return (err * m).sum((1, 2, 3)) / (m.sum((1, 2, 3)) * err.shape[-1]).clamp_min(1.0)


__all__ = ["EVAL_CHUNK", "Stacked"]
