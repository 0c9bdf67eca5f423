"""JSON Schema → grammar IR (SPEC §5): :func:`compile_schema`.

See :mod:`tether.schema.compiler` for the pipeline; :mod:`tether.schema.keywords` lists
what is enforced, ignored and refused.
"""

from tether.schema.compiler import compile_schema

__all__ = ["compile_schema"]
