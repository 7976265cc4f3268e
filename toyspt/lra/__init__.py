"""The LRA bridge: load Transformers trained with the LRA self-pretraining code of Amos et
al. 2024 (Lightning ``.ckpt`` files) onto toyspt's own explicit attention, feed them LRA
inputs, and run the same probes per layer and head.

* :mod:`.lightning`: safe reading / writing of the checkpoint files; :mod:`.guard`: the
  reading budget (zip records, pickle size/opcodes, config depth/values) checked first;
* :mod:`.runconfig`: the table of every run-config field read, honoured or refused;
* :mod:`.model`: the LRA Transformer on :class:`toyspt.nn.attention.Attention`;
* :mod:`.checkpoint`: architecture inference and the key map (``load_lra``, ``save_lra``);
* :mod:`.listops`, :mod:`.inputs`: ListOps generator/vocabulary, pixel arrays, SPT masking, losses;
* :mod:`.report`, :mod:`.figure`: the per-layer/head probe report (``toyspt lra`` is :mod:`toyspt.cli.lra`);
* :mod:`.demo`: small scratch/SPT models trained offline, saved in the checkpoint format.

Facts checked against that public code (design/lra.md was written from it; where this list
differs or adds, the bridge follows this list):

* Keys: ``encoder.0`` is the embedding/linear input encoder and ``encoder.1.pe`` the
  positional buffer (the task encoder is None and the sequential wrapper flattens);
  attention ``model.layers.{2i}.layer.linears.{0,1,2,3}`` = Q, K, V, O (the first three
  project q, k, v, the last one is the output); feed-forward ``ff.0.0`` (Linear, then the
  run's activation in ``ff.0.1``, GELU in the LRA configs), ``ff.1`` dropout, ``ff.2`` Linear.
* The embedding is **not** scaled by sqrt(d) before the table is added (only the code's
  language-model task rescales; the LRA runs use the base task). The table is
  ``pe[p, 2i] = sin(p * exp(-ln(10^4) 2i/d))``, ``pe[p, 2i+1] = cos(...)``, 16384 rows,
  computed in float32 (up to ~1e-3 from the float64 formula at p ~ 16k): the bridge uses the
  stored buffer. A learned variant stores ``(max_len, 1, d)`` and is added as ``pe[:L]``
  (L, 1, d) to (B, L, d) inputs, i.e. broadcast over the batch axis, not by position: refused.
* Pre-norm: ``y = x + layer(LayerNorm(x))`` (residual with unit weights), final
  ``model.norm`` LayerNorm (eps 1e-5); post-norm runs would be ``LN(x + layer(x))`` without
  a final norm (supported, unused by the LRA configs).
* Attention: torch's fused attention with its default 1/sqrt(d_head) scale; no key-padding
  mask ever reaches it. Its ``dropout_p`` is passed even in eval mode (0 in every LRA config).
  All three wrappers (``mha``: ``nn.MultiheadAttention``, packed ``in_proj`` rows [Q; K; V];
  ``mhfa``; ``mhfla``) default to **causal**; a file without run config must say
  (``--causal``/``--no-causal``). ``mhfla`` attends from each block of ``window_size`` to
  ``look_backward`` blocks before and ``look_forward`` after (padding masked; the length must
  be a multiple of the window). ``rotary=true`` rotates q and k per head in interleaved pairs
  (2m, 2m+1) by ``p * freqs[m]``, ``freqs = 10000^(-2m/d_head)`` stored as ``rope.freqs``.
  The FF activation is ``model.layer[ff].activation`` (that code's ``Activation``).
* Pooling: ListOps uses mean pooling over each sequence's valid length (``<eos>`` included,
  padding excluded) and a linear head; Text the MLP head (Linear-ReLU-Linear) with lengths;
  Image the MLP head over all 1024 positions; Pathfinder a linear head; Path-X max pooling
  and block-local attention (window 4096, one block back and one forward). Retrieval pools
  each document and classifies ``[a, b, a-b, a*b]`` with Linear-**GELU**-Linear (hidden d);
  the two documents of a pair are stacked as 2B rows.
* SPT checkpoints keep a per-token decoder under the **same** key as the linear classifier
  (``decoder.0.output_transform``); the run config (``dataset.mlm_prob``/``causal_lm``), a
  flag, or the output size tells them apart. Fine-tuning from SPT drops the decoder, and
  for pixel encoders it drops the mask column: every fine-tuned or from-scratch pixel
  classifier (CIFAR and Pathfinder alike) has an input weight of shape (d, 1), so it has no
  mask channel and no reconstruction loss of its own.
* ListOps vocabulary: ``<mask>``=0, ``<pad>``=1, ``<unk>``=2, ``<eos>``=3, then the 15 symbols
  in **decreasing frequency in the training file** (torchtext order; ties alphabetical), so
  symbol ids depend on the data: 19 tokens. Tokens: ``]`` becomes ``X``, parentheses dropped.
* ListOps generator: the constant named ``VALUE_P = 0.25`` is the probability of an
  *operator* (a digit with probability 0.75), not of a value; the root has depth 1 and nodes
  at depth 10 are digits; lengths satisfy 500 < n < 2000 tokens (without ``<eos>``); MED is
  ``int(median)``, i.e. the floor of the mean of the two middle values for an even count.
* SPT masking: per example before padding (padding never masked, ``<eos>`` can be); token
  targets are -100 off the mask, so the cross-entropy is the mean over the batch's masked
  tokens. Pixels: ``[value (1-m), m]`` and the mean absolute error on masked positions. The
  probability comes from the run (``mlm_prob``; 0.5 in the example configs, 0 by default in
  the ListOps LM dataset config, i.e. set on the command line).
* Pixel normalisation: grayscale CIFAR ``(x/255 - 122.6/255) / (61/255)`` after PIL's luma
  conversion; Pathfinder/Path-X ``(x/255 - 0.5) / 0.5``.
* The checkpoint's ``hyper_parameters`` is the OmegaConf DictConfig (its ``model.encoder``
  and ``model.decoder`` were popped at setup; top-level ``encoder``/``decoder`` remain);
  ``hparams_type`` stores the DictConfig class itself.
"""
from toyspt.lra.checkpoint import ArchHints, LoadedLRA, LoadReport, load_lra, lra_state_dict, save_lra
from toyspt.lra.lightning import CheckpointError, CheckpointRefused, read_checkpoint, write_checkpoint
from toyspt.lra.model import LRAConfig, LRATransformer, build_lra

__all__ = ["ArchHints", "LoadedLRA", "LoadReport", "load_lra", "lra_state_dict", "save_lra", "CheckpointError",
           "CheckpointRefused", "read_checkpoint", "write_checkpoint", "LRAConfig",
           "LRATransformer", "build_lra"]
