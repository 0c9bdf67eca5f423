"""The embedded model as a transformers checkpoint: the GGUF dequantised to float32.

transformers and vLLM load a Hugging Face folder (``config.json``, ``model.safetensors``,
the tokenizer files), not tether's embedded Q4_1 GGUF. :func:`export_embedded` builds
that folder once — transformers reads and dequantises the GGUF (it needs ``gguf`` and
``accelerate``), the weights are written with safetensors, ``config.json`` gets the
``architectures`` entry vLLM looks up the model class by — and keeps it under tether's
cache folder (``hf-export/<gguf name>-<size>``); later calls return the folder at once.
torch and transformers are imported only when the folder has to be built.

    from tether.runtime.hf_export import export_embedded
    folder = export_embedded()         # then AutoModelForCausalLM.from_pretrained(folder)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tether.cache_dir import cache_dir
from tether.errors import ModelError
from tether.runtime.embedded import embedded_model_path

# Written last: a folder with this file is complete (a killed export leaves none).
DONE = "tether-export.json"


def export_embedded(gguf: str | os.PathLike[str] | None = None,
                    folder: str | os.PathLike[str] | None = None) -> Path:
    """The transformers folder of ``gguf`` (default: the embedded SmolLM2), built if
    missing. ``folder``: where to put it (default: tether's cache, or a temporary folder
    when the cache is off)."""
    path = Path(gguf) if gguf is not None else embedded_model_path()
    if not path.is_file():
        raise ModelError(f"{path}: no such GGUF file")
    if folder is None:
        base = cache_dir()
        if base is None:  # caching off: a fresh folder each time
            return _build(path, Path(tempfile.mkdtemp(prefix="tether-hf-")))
        folder = base / "hf-export" / f"{path.stem}-{path.stat().st_size}"
    target = Path(folder)
    if (target / DONE).is_file():
        return target
    # Built beside the target, then renamed into place: concurrent builders (two test
    # processes) each finish their own copy and the first rename wins.
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _build(path, staging)
        if target.exists() and not (target / DONE).is_file():
            shutil.rmtree(target, ignore_errors=True)  # a damaged earlier attempt
        try:
            staging.rename(target)
        except OSError:
            if not (target / DONE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _build(gguf: Path, out: Path) -> Path:
    """Dequantise ``gguf`` with transformers and write the checkpoint into ``out``."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                 dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        # safetensors refuses tensors that share memory; the loader re-ties the head.
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(_config(model), indent=2))
    tokenizer.save_pretrained(str(out))
    _portable_tokenizer_config(out / "tokenizer_config.json", tokenizer.chat_template,
                               model.config.max_position_embeddings)
    for file in out.iterdir():  # mkdtemp and safetensors create them private
        file.chmod(0o644)
    out.chmod(0o755)
    (out / DONE).write_text(json.dumps({"gguf": str(gguf),
                                        "size": gguf.stat().st_size}))
    return out


def _portable_tokenizer_config(path: Path, chat_template: str | None, length: int) -> None:
    """Make ``tokenizer_config.json`` readable by older transformers too: the class name
    both know for a ``tokenizer.json`` tokenizer, the chat template inline (older
    versions do not all read ``chat_template.jinja``), the model's context length."""
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["model_max_length"] = length
    if chat_template:
        config["chat_template"] = chat_template
    path.write_text(json.dumps(config, indent=2))


def _config(model: Any) -> dict[str, Any]:
    """The model's config as a plain (not GGUF-quantised) checkpoint's, readable by the
    transformers that vLLM pins as well as by the current one."""
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_model_name_or_path", None)
    config.pop("_name_or_path", None)
    config["architectures"] = [type(model).__name__]
    config["torch_dtype"] = "float32"
    rope = config.get("rope_parameters") or {}
    if "rope_theta" in rope:  # older transformers read the base at the top level
        config.setdefault("rope_theta", rope["rope_theta"])
    return config
