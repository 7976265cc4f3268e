"""Models: the one explicit attention with its hook points (:mod:`.attention`), every hook
point's tensor of a forward pass by name (:mod:`.activation_cache`), positional encodings
(:mod:`.positional`), the toy model (:mod:`.model`)."""
from toyspt.util.lazy import exports

__all__, __getattr__, __dir__ = exports(globals(), {
    "toyspt.nn.attention": ("Attention", "hooks"),
    "toyspt.nn.activation_cache": ("ActivationCache", "run_with_cache"),
    "toyspt.nn.model": ("GROUPS", "ModelConfig", "ToyTransformer", "build_model"),
})
