"""The shared Glaive function-call schemas (``/work/shared/data/glaive``) as the
benchmarks use them: the schemas by file name, the prompt that asks for a call, and
validation with ``jsonschema``."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "glaive"
PROMPT = ("Call the function `{name}` with realistic arguments. "
          "Reply with the JSON arguments only.")


def files(limit: int | None = None) -> list[Path]:
    """The first ``limit`` schema files, by name."""
    return sorted(DATA.glob("*.json"))[:limit]


def function_name(path: Path) -> str:
    """The function a schema file describes: its name without the last ``_`` part."""
    return path.stem.rsplit("_", 1)[0]


def schemas(limit: int | None = None) -> list[tuple[str, dict]]:
    """``(function name, parameter schema)`` of the first ``limit`` files."""
    return [(function_name(p), json.loads(p.read_text())) for p in files(limit)]


def valid(text: str, schema: object) -> bool:
    """Whether ``text`` is JSON that validates against ``schema``."""
    import jsonschema

    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError, jsonschema.SchemaError):
        return False
    return True
