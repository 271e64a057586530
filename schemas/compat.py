"""The compatibility rule, as code: what may change between schema versions.

A new version of an event may add optional fields. It may not remove a field,
change a field's type (JSON types, nullability, enum values, const, format),
make an optional field required or a required one optional, or add a required
field. Numeric/string bounds are not compared: tightening them is a judgement
call left to review.

:func:`breaking_changes` compares two JSON Schemas (as generated into
``schemas/json/``) and lists every violation as a readable sentence; the
generator refuses to overwrite a checked-in schema with a breaking one, and a
test checks each version against the previous one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Schema = dict[str, Any]

ENVELOPE_VARIANT_FIELDS = ("type", "version")
"""Top-level fields that legitimately differ between versions of one event."""


def breaking_changes(
    old: Schema, new: Schema, *, ignore_root: Iterable[str] = ENVELOPE_VARIANT_FIELDS
) -> list[str]:
    """Every way ``new`` breaks the compatibility rule relative to ``old``."""
    problems: list[str] = []
    _compare(old, new, "$", old, new, problems, frozenset(ignore_root))
    return problems


def _compare(
    old: Schema,
    new: Schema,
    path: str,
    old_doc: Schema,
    new_doc: Schema,
    out: list[str],
    ignore: frozenset[str] = frozenset(),
) -> None:
    o, n = _shape(old, old_doc), _shape(new, new_doc)
    for aspect in ("types", "enum", "const", "format"):
        if o[aspect] != n[aspect]:
            out.append(f"{path}: retyped ({aspect} {_show(o[aspect])} -> {_show(n[aspect])})")
    o_props, n_props = o["properties"], n["properties"]
    for name, old_prop in o_props.items():
        if name in ignore:
            continue
        where = f"{path}.{name}"
        if name not in n_props:
            out.append(f"{where}: removed")
            continue
        was, now = name in o["required"], name in n["required"]
        if was and not now:
            out.append(f"{where}: required field made optional")
        if now and not was:
            out.append(f"{where}: optional field made required")
        _compare(old_prop, n_props[name], where, old_doc, new_doc, out)
    for name in n_props.keys() - o_props.keys():
        if name in n["required"] and name not in ignore:
            out.append(f"{path}.{name}: new field is required (new fields must be optional)")
    for part in ("items", "values"):
        if o[part] is not None and n[part] is not None:
            _compare(o[part], n[part], f"{path}[]", old_doc, new_doc, out)


def _resolve(schema: Schema, doc: Schema) -> Schema:
    seen = 0
    while "$ref" in schema and seen < 64:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local $refs are supported, got {ref!r}")
        target: Any = doc
        for part in ref[2:].split("/"):
            target = target[part]
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **extra}
        seen += 1
    return schema


def _shape(schema: Schema, doc: Schema) -> dict[str, Any]:
    """Normalize a (sub)schema into the aspects the rule compares."""
    schema = _resolve(schema, doc)
    alternatives: list[Schema] = schema.get("anyOf") or schema.get("oneOf") or []
    branches = [_resolve(b, doc) for b in alternatives]
    if not branches:
        branches = [schema]
    types: set[str] = set()
    enum: set[Any] = set()
    const: set[str] = set()
    formats: set[str] = set()
    props: dict[str, Schema] = {}
    required: set[str] = set()
    items = values = None
    for b in branches:
        kind = b.get("type")
        types.update(kind if isinstance(kind, list) else [kind] if kind else [])
        enum.update(b.get("enum", []))
        if "const" in b:
            const.add(repr(b["const"]))
        if "format" in b:
            formats.add(b["format"])
        props.update(b.get("properties", {}))
        required.update(b.get("required", []))
        items = b.get("items", items)
        if isinstance(b.get("additionalProperties"), dict):
            values = b["additionalProperties"]
    return {
        "types": frozenset(types) or frozenset({"any"}),
        "enum": frozenset(enum),
        "const": frozenset(const),
        "format": frozenset(formats),
        "properties": props,
        "required": required,
        "items": items,
        "values": values,
    }


def _show(value: frozenset[Any]) -> str:
    return "{" + ", ".join(sorted(map(str, value))) + "}"
