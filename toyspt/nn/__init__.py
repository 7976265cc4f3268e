"""Models: the one explicit attention with its hook points (:mod:`.attention`), positional
encodings (:mod:`.positional`), the toy model (:mod:`.model`)."""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.nn.attention": ("Attention", "hooks"),
    "toyspt.nn.model": ("GROUPS", "ModelConfig", "ToyTransformer", "build_model"),
})
