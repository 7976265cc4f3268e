"""The LRA bridge: load Transformers trained with the LRA self-pretraining code (Lightning
``.ckpt`` files) onto toyspt's own explicit attention, feed them LRA inputs, and run the
same probes per layer and head.

* :mod:`.lightning`: safe reading / writing of the checkpoint files;
* :mod:`.model`: the LRA Transformer on :class:`toyspt.attention.Attention`;
* :mod:`.checkpoint`: architecture inference and the key map (``load_lra``, ``save_lra``);
* :mod:`.listops`, :mod:`.inputs`: ListOps generator/vocabulary, pixel arrays, SPT masking, losses;
* :mod:`.report`: the per-layer/head probe report; :mod:`.cli`: ``toyspt lra probe``;
* :mod:`.demo`: small scratch/SPT models trained offline, saved in the checkpoint format.
"""
from .checkpoint import LoadedLRA, LoadReport, load_lra, lra_state_dict, save_lra
from .lightning import CheckpointError, CheckpointRefused, read_checkpoint, write_checkpoint
from .model import LRAConfig, LRATransformer, build_lra

__all__ = ["LoadedLRA", "LoadReport", "load_lra", "lra_state_dict", "save_lra", "CheckpointError",
           "CheckpointRefused", "read_checkpoint", "write_checkpoint", "LRAConfig",
           "LRATransformer", "build_lra"]
