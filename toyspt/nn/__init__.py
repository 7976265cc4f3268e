"""Models: the one explicit attention with its hook points (:mod:`.attention`), positional
encodings (:mod:`.positional`), the toy model (:mod:`.model`)."""
from toyspt.nn.attention import Attention, hooks
from toyspt.nn.model import GROUPS, ModelConfig, ToyTransformer, build_model

__all__ = ["Attention", "hooks", "GROUPS", "ModelConfig", "ToyTransformer", "build_model"]
