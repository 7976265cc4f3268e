"""The LRA bridge: load Transformers trained with the LRA self-pretraining code of Amos et
al. 2024 (Lightning ``.ckpt`` files) onto toyspt's own explicit attention, feed them LRA
inputs, and run the same probes per layer and head.

* :mod:`.lightning`: safe reading / writing of the checkpoint files; :mod:`.guard`: the
  reading budget (zip records, pickle size/opcodes, config depth/values) checked first;
* :mod:`.runconfig`: the table of every run-config field read, honoured or refused;
* :mod:`.model`: the LRA Transformer on :class:`toyspt.nn.attention.Attention`;
* :mod:`.checkpoint`: architecture inference and the key map (``load_lra``, ``save_lra``);
* :mod:`.inputs`: LRA inputs read from files (``.npy`` pixels and labels), SPT masking, the label and
  reconstruction losses the probes differentiate; :mod:`.probe_data`: the batch a probe reads;
* :mod:`.report`, :mod:`.figure`: the per-layer/head probe report (``toyspt lra`` is :mod:`toyspt.cli.lra`);
  :mod:`.heads`: the heads a file lacks, constructed on frozen features;
* :mod:`.convert`: a run's model as that code's model and checkpoint (``save_run``, with its arm);
* :mod:`.demo`: small scratch/SPT models trained offline, saved in the checkpoint format.

The LRA-like data the toolkit makes itself (PathFinder, digits, ListOps, Fashion-MNIST) are kinds
of data in :mod:`toyspt.kinds`, below the bridge; the CPU-scale LRA study is :mod:`toyspt.studies`.

The checkpoint facts the bridge follows (keys, positional table, norms, attention, pooling,
vocabulary, masking): docs/lra-facts.md. Names below load on first use.
"""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.lra.checkpoint": ("ArchHints", "LoadedLRA", "LoadReport", "load_lra", "lra_state_dict", "save_lra"),
    "toyspt.lra.lightning": ("CheckpointError", "CheckpointRefused", "read_checkpoint", "write_checkpoint"),
    "toyspt.lra.model": ("LRAConfig", "LRATransformer", "build_lra"),
})
