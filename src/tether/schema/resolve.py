"""``$ref`` resolution: documents, base URIs, ``$id``/``$anchor``, JSON pointers, a registry.

Every schema position is named by a *node id*: its JSON pointer in the root document
(``""``, ``/properties/a``…) or ``uri#pointer`` in a registry document. Node ids double
as the error locations the compiler reports. Nothing is fetched: a ``$ref`` must point
into the root document (by pointer, ``$id`` or anchor) or into a schema the caller put
in the registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from tether.errors import CompileError
from tether.schema.pointers import join, split

DEFAULT_BASE = "https://tether.invalid/root.json"
_NOT_SCHEMAS = frozenset({"enum", "const", "default", "examples", "example"})


@dataclass(frozen=True)
class Node:
    """A schema position: the schema, its node id, its base URI and its draft."""

    schema: Any
    nid: str
    base: str
    draft: int  # 4, 6, 7 (the drafts where $ref hides its siblings) or 2020


def draft_of(schema: Any) -> int:
    """The draft a document declares with ``$schema`` (2020-12 when it says nothing)."""
    uri = schema.get("$schema", "") if isinstance(schema, dict) else ""
    if not isinstance(uri, str):
        return 2020
    for number in (3, 4, 6, 7):
        if f"draft-0{number}" in uri:
            return max(number, 4)
    return 2020


class Resolver:
    """The documents of one compilation and the node ids in them."""

    def __init__(self, root: Any, registry: dict[str, Any]) -> None:
        self._docs: dict[str, tuple[Any, int]] = {}  # doc key ("" = root) -> (doc, draft)
        self._resources: dict[str, tuple[str, list[str]]] = {}  # uri -> (doc key, keys)
        self._anchors: dict[str, tuple[str, list[str]]] = {}  # "uri#name" -> (doc, keys)
        self._dynamic: dict[str, tuple[str, list[str]]] = {}  # "uri#name": $dynamicAnchor
        self._dynamic_resources: set[str] = set()  # resources with a $dynamicAnchor
        self._registry = registry
        self._load("", root, DEFAULT_BASE)

    def mentions(self, word: str) -> bool:
        """Whether ``word`` appears anywhere in the root document or the registry's."""
        docs = [self._docs[""][0], *self._registry.values()]
        return any(word in json.dumps(doc, default=str) for doc in docs)

    def root(self) -> Node:
        """The root schema."""
        return self.node("")

    def node(self, nid: str) -> Node:
        """The node called ``nid``."""
        if nid == "" or nid.startswith("/"):  # the root document
            doc_key, pointer = "", nid
        else:  # "uri#pointer": a URI without fragment has no '#'
            doc_key, _, pointer = nid.partition("#")
        doc, draft = self._docs[doc_key]
        return self._walk(doc_key, doc, draft, split(pointer, nid), nid)

    def resolve(self, ref: Any, at: Node, keyword: str = "$ref") -> Node:
        """The node a ``$ref`` (or ``keyword``) found at ``at`` points to."""
        where = join(at.nid, keyword)
        if not isinstance(ref, str):
            raise CompileError(f"{keyword} must be a string", location=where)
        target = join_uri(at.base, ref)
        uri, fragment = urldefrag(target)
        if uri not in self._resources:
            self._load_external(ref, uri, where)
        if fragment and not fragment.startswith("/"):
            found = self._anchors.get(f"{uri}#{fragment}")
            if found is None:
                raise CompileError(f"{keyword} {ref!r}: no anchor {fragment!r}", location=where)
            doc_key, keys = found
        else:
            doc_key, keys = self._resources[uri]
            keys = keys + split(fragment, where)
        return self._node_at(doc_key, keys, where)

    def _node_at(self, doc_key: str, keys: list[str], where: str | None = None) -> Node:
        """The node at ``keys`` in document ``doc_key`` (``where``: the reference)."""
        doc, draft = self._docs[doc_key]
        prefix = f"{doc_key}#" if doc_key else ""
        return self._walk(doc_key, doc, draft, keys, prefix + join("", *keys), where)

    def has_dynamic_anchors(self, uri: str) -> bool:
        """Whether the schema resource ``uri`` declares a ``$dynamicAnchor``."""
        return uri in self._dynamic_resources

    def dynamic_target(self, ref: str, at: Node, scope: tuple[str, ...]) -> Node:
        """The node a ``$dynamicRef`` found at ``at`` points to, in the dynamic ``scope``
        (the resources with dynamic anchors entered so far, outermost first): where the
        reference, resolved like ``$ref``, lands on a ``$dynamicAnchor`` of its name,
        the outermost resource of the scope with a ``$dynamicAnchor`` of that name."""
        target = self.resolve(ref, at, "$dynamicRef")
        name = urldefrag(ref)[1]
        if not name or name.startswith("/") or not isinstance(target.schema, dict) \
                or target.schema.get("$dynamicAnchor") != name:
            return target
        for uri in scope:
            found = self._dynamic.get(f"{uri}#{name}")
            if found is not None:
                return self._node_at(*found)
        return target

    # -- loading -----------------------------------------------------------------------
    def _load_external(self, ref: str, uri: str, where: str) -> None:
        for key in (uri, urldefrag(ref)[0]):
            if key in self._registry:
                self._load(uri, self._registry[key], uri)
                return
        raise CompileError(f"$ref {ref!r} points outside the schema and its registry "
                           "(nothing is fetched)", location=where)

    def _load(self, doc_key: str, doc: Any, base: str) -> None:
        draft = draft_of(doc)
        self._docs[doc_key] = (doc, draft)
        if doc_key:
            self._resources[doc_key] = (doc_key, [])
        self._index(doc_key, doc, draft, base, [], is_root=True)

    def _index(self, doc_key: str, schema: Any, draft: int, base: str, keys: list[str],
               *, is_root: bool = False) -> None:
        """Record the ``$id`` and anchors of every dict under ``schema``."""
        stack: list[tuple[Any, str, list[str], bool]] = [(schema, base, keys, is_root)]
        while stack:
            value, base, keys, root = stack.pop()
            if isinstance(value, list):
                stack.extend((v, base, keys + [str(i)], False) for i, v in enumerate(value))
                continue
            if not isinstance(value, dict):
                continue
            new_base = _own_id(value, draft)
            if new_base is not None:
                base = join_uri(base, new_base)
                uri, fragment = urldefrag(base)
                if fragment and not fragment.startswith("/"):  # draft-07 "$id": "#name"
                    self._anchors.setdefault(f"{uri}#{fragment}", (doc_key, keys))
                base = uri
                self._resources.setdefault(uri, (doc_key, keys))
            if root:
                self._resources.setdefault(urldefrag(base)[0], (doc_key, keys))
            anchor = value.get("$anchor")
            if isinstance(anchor, str):
                self._anchors.setdefault(f"{base}#{anchor}", (doc_key, keys))
            dynamic = value.get("$dynamicAnchor") if draft >= 2020 else None
            if isinstance(dynamic, str):  # also a plain anchor
                self._anchors.setdefault(f"{base}#{dynamic}", (doc_key, keys))
                self._dynamic.setdefault(f"{base}#{dynamic}", (doc_key, keys))
                self._dynamic_resources.add(base)
            for k, v in value.items():
                if k not in _NOT_SCHEMAS:
                    stack.append((v, base, keys + [k], False))

    def _walk(self, doc_key: str, doc: Any, draft: int, keys: list[str], nid: str,
              where: str | None = None) -> Node:
        value = doc
        base = self._base_of_doc(doc_key)
        for key in [None, *keys]:
            if key is not None:
                value = _child(value, key)
                if value is _MISSING:
                    raise CompileError(f"$ref points to {nid!r}, which does not exist",
                                       location=where if where is not None else nid)
            if isinstance(value, dict):
                own = _own_id(value, draft)
                if own is not None:
                    base = urldefrag(join_uri(base, own))[0]
        return Node(value, nid, base, draft)

    def _base_of_doc(self, doc_key: str) -> str:
        return doc_key or DEFAULT_BASE


_MISSING = object()


def _child(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key, _MISSING)
    if isinstance(value, list) and key.isdigit() and int(key) < len(value):
        return value[int(key)]
    return _MISSING


def join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986), URNs included: a fragment alone
    replaces the base's fragment; ``urljoin`` leaves non-hierarchical bases alone."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if urlsplit(ref).scheme:
        return ref
    return urljoin(base, ref)


def _own_id(schema: dict, draft: int) -> str | None:
    """The ``$id`` (draft-04: ``id``) a schema declares, if any. Up to draft-07 a
    ``$ref`` hides its siblings, an identifier too; draft-04 has no ``$id`` (a document
    of its era that writes one declares nothing)."""
    if draft <= 7 and "$ref" in schema:
        return None
    value = schema.get("id" if draft <= 4 else "$id")
    return value if isinstance(value, str) else None
