"""What is statically known about importable modules, without running their code: the
top-level module names this interpreter can import, and each module's attributes.

A module's attributes are the names its source binds at top level (``ast``: inside
``if``/``try`` blocks too, and the names its ``from … import *`` brings) together with
the names typeshed's stub declares (the ``typeshed_client`` package, when installed) —
the stub alone for modules without Python source (``math``, ``sys``, ``itertools``;
their private names are not listed there, so any ``_name`` is taken). A package's
submodules count as its attributes. A module whose names cannot be known — no source
and no stub, or a module-level ``__getattr__`` — has ``None`` for attributes: callers
constrain nothing there (never a false "no").

Nothing here imports the module asked about: specs are found with
:class:`importlib.machinery.PathFinder`, which only searches the file system.
"""

from __future__ import annotations

import ast
import functools
import logging
import pkgutil
import sys
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path

# Attributes every module object has, whatever its source binds.
MODULE_DUNDERS = frozenset({
    "__name__", "__doc__", "__file__", "__spec__", "__loader__", "__package__",
    "__path__", "__dict__", "__all__", "__builtins__", "__cached__", "__annotations__",
})
_MAX_STAR_DEPTH = 4
_MAX_SOURCE_BYTES = 4_000_000


@dataclass(frozen=True)
class ModuleInfo:
    """One module's attributes (``None``: unknown) and, of those, the ones that are
    modules themselves (``os.path`` → ``posixpath``), by attribute name."""

    name: str
    attributes: frozenset[str] | None
    submodules: dict[str, str]
    private_open: bool = False  # stub only: private names (``_x``) are not listed

    def has(self, attribute: str) -> bool:
        """Whether the module has ``attribute`` (``True`` when unknown)."""
        if self.attributes is None or attribute in self.attributes:
            return True
        return self.private_open and attribute.startswith("_")


@functools.cache
def available_modules() -> frozenset[str]:
    """The top-level names ``import`` can find here: built-in modules, the standard
    library and every module or package on ``sys.path``."""
    names = set(sys.builtin_module_names) | set(sys.stdlib_module_names)
    names.update(m.name for m in pkgutil.iter_modules())
    return frozenset(n for n in names if n.isidentifier())


@functools.lru_cache(maxsize=512)
def module_info(name: str) -> ModuleInfo | None:
    """What is known about module ``name`` (dotted), or ``None`` if no such module is
    found."""
    return _info(name, 0)


def _info(name: str, depth: int) -> ModuleInfo | None:
    location = _locate(name)
    if location is None:
        return None
    source, package_dir = location
    submodules = {}
    if package_dir is not None:
        for m in pkgutil.iter_modules([str(package_dir)]):
            submodules[m.name] = f"{name}.{m.name}"
    # Source and stub together: sources create some names dynamically (``re``'s flags
    # through ``globals().update``) that stubs list; stubs skip private names.
    attributes = _stub_names(name)
    if source is not None:
        from_source = _source_names(name, source, submodules, depth)
        attributes = None if from_source is None else from_source | (attributes or set())
    if attributes is None:
        return ModuleInfo(name, None, submodules)
    return ModuleInfo(name, frozenset(attributes | set(submodules) | MODULE_DUNDERS),
                      submodules, private_open=source is None)


def _locate(name: str) -> tuple[Path | None, Path | None] | None:
    """``(source file or None, package directory or None)`` for a dotted module name;
    ``None`` if it is not found. Built-in modules have neither."""
    parts = name.split(".")
    if parts[0] in sys.builtin_module_names and len(parts) == 1:
        return None, None
    path: list[str] | None = None
    spec = None
    for i in range(len(parts)):
        try:
            spec = PathFinder.find_spec(".".join(parts[:i + 1]), path)
        except (ImportError, ValueError, OSError):
            return None
        if spec is None:
            return None
        path = list(spec.submodule_search_locations or [])
        if i < len(parts) - 1 and not path:
            return None
    assert spec is not None
    origin = Path(spec.origin) if spec.origin and spec.has_location else None
    source = origin if origin is not None and origin.suffix == ".py" else None
    package_dir = Path(path[0]) if path else None
    return source, package_dir


def _source_names(name: str, source: Path, submodules: dict[str, str],
                  depth: int) -> set[str] | None:
    """The names the module's top level binds (``None``: not knowable statically)."""
    try:
        if source.stat().st_size > _MAX_SOURCE_BYTES:
            return None
        tree = ast.parse(source.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
    names: set[str] = set()
    package = name if source.name == "__init__.py" else name.rpartition(".")[0]
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__" and not isinstance(node, ast.ClassDef):
                return None
            names.add(node.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                names.add(bound)
                if alias.asname:
                    submodules.setdefault(bound, alias.name)
        elif isinstance(node, ast.ImportFrom):
            origin = _absolute(node, package)
            for alias in node.names:
                if alias.name == "*":
                    star = _star_names(origin, depth)
                    if star is None:
                        return None
                    names |= star
                else:
                    names.add(alias.asname or alias.name)
        else:
            names.update(_bound_names(node))
    return names


def _top_level(body: list[ast.stmt]):
    """The module's statements, looking into ``if``/``try``/``with`` blocks (whose
    bindings are module attributes on some path)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
            yield from _top_level(node.finalbody)
        elif isinstance(node, (ast.With, ast.For, ast.While)):
            yield from _top_level(node.body)


def _bound_names(node: ast.stmt) -> set[str]:
    """Names an assignment-like statement binds at module level."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
        targets = [node.target]
    elif isinstance(node, ast.With):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
    elif isinstance(node, ast.Global):
        return set(node.names)
    names = set()
    for t in targets:
        for sub in ast.walk(t):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
    return names


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _star_names(origin: str | None, depth: int) -> set[str] | None:
    if origin is None or depth >= _MAX_STAR_DEPTH:
        return None
    info = _info(origin, depth + 1)
    if info is None or info.attributes is None:
        return None
    return {n for n in info.attributes if not n.startswith("_")}


def _stub_names(name: str) -> set[str] | None:
    try:
        import typeshed_client
    except ImportError:
        return None
    # The client warns (on stderr, through logging) about other packages' stubs it
    # cannot follow (a star-import of a module it lacks): not the user's concern.
    logging.getLogger("typeshed_client").setLevel(logging.ERROR)
    try:
        names = typeshed_client.get_stub_names(name)
    except Exception:  # a stub the client cannot read: unknown, not an error
        return None
    if names is None:
        return None
    if "__getattr__" in names:
        return None
    return {n for n, info in names.items()
            if info.is_exported or type(info.ast).__name__ != "ImportedName"}
