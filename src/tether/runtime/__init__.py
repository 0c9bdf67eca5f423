"""Running models (SPEC §10): the generation loop, the llama.cpp adapter and the embedded
default model. ``llama_cpp`` is imported only when a model is loaded."""

from tether.runtime.embedded import embedded_model_path
from tether.runtime.generate import (
    DEFAULT_SAMPLING,
    GenerationResult,
    Model,
    ModelSource,
    StepInfo,
    generate,
    load_model,
)

__all__ = [
    "DEFAULT_SAMPLING",
    "GenerationResult",
    "Model",
    "ModelSource",
    "StepInfo",
    "embedded_model_path",
    "generate",
    "load_model",
]
