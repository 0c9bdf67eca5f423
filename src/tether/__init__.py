"""tether: constrained decoding with exact token masks.

Constraints: :class:`Regex`, :class:`Choices`, :class:`JsonSchema`, :class:`Grammar` (GBNF or
Lark) and ready-made grammars in :mod:`tether.grammars` (``tether.grammars.python()``).

Compile a constraint for a vocabulary, walk it token by token with a matcher, or let
:func:`generate` drive a model::

    vocab = tether.Vocabulary.from_file("model.gguf")
    compiled = tether.compile(tether.Regex(r"\\d{4}-\\d{2}-\\d{2}"), vocab)
    m = compiled.matcher()
    m.mask()  # uint32 Bitmask words
"""

from tether.kernel_cache import announce_first_run

announce_first_run()  # before the imports below compile numba kernels

from tether import grammars
from tether.compiler import compile  # noqa: A004
from tether.constraints import Choices, Grammar, JsonSchema, Regex
from tether.engine.batch import consume_tokens, fill_masks
from tether.engine.compiled import CheckResult, Compiled
from tether.engine.matcher import Forced, Matcher
from tether.errors import (
    CompileError,
    ConstraintViolation,
    LimitExceeded,
    ModelError,
    NoLegalContinuation,
    TetherError,
    TokenIdError,
    VocabularyError,
)
from tether.runtime.generate import GenerationResult, generate
from tether.sampling import Pipeline, Step
from tether.vocab import Vocabulary

__all__ = [
    "CheckResult",
    "Choices",
    "CompileError",
    "Compiled",
    "ConstraintViolation",
    "Forced",
    "GenerationResult",
    "Grammar",
    "JsonSchema",
    "LimitExceeded",
    "Matcher",
    "ModelError",
    "NoLegalContinuation",
    "Pipeline",
    "Regex",
    "Step",
    "TetherError",
    "TokenIdError",
    "Vocabulary",
    "VocabularyError",
    "compile",
    "consume_tokens",
    "fill_masks",
    "generate",
    "grammars",
]

from tether.fusion import (  # noqa: E402
    Domain,
    FusionConfig,
    FusionResult,
    IntensityLevel,
    Phase,
    SoftScore,
    fuse,
)

__all__ += ["Domain", "FusionConfig", "FusionResult", "IntensityLevel", "Phase", "SoftScore",
            "fuse"]

# numba (imported above) loaded llvmlite: keep it from breaking a vLLM worker started later.
from tether.llvmlite_guard import guard as _guard_llvmlite  # noqa: E402

_guard_llvmlite()
