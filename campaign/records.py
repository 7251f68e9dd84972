"""Typed records that leave as JSON: a frozen dataclass read by attribute inside campaign, and `to_json()` where
it is written (a file, the catalog, `--json`, a Prefect result). The one place a record becomes a JSON object.

At the bottom of the package (it imports nothing of campaign), so every layer's records can use it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, ClassVar


class JsonRecord:
    """Mixin for a frozen dataclass: `to_json()` gives its fields in declaration order, each nested record by its
    own `to_json()`. `OMIT_WHEN_NONE` names the keys the JSON leaves out while None (keys only some records have);
    `OMIT_WHEN_EMPTY` those left out while empty (a note written only when there is one);
    `JSON_KEYS` renames a field whose key is no Python name (`with`); `NOT_IN_JSON` names fields kept for the
    code only (a series that is drawn, not written); `JSON_PROPERTIES` names properties written after the fields
    (a figure derived from them, such as a verdict's `suffices`); `JSON_INLINE` names fields holding a record whose
    keys are written in the field's place (a section that only some records extend, left out while None);
    `JSON_ROUND` gives the decimals a field is written to (seconds to the millisecond)."""

    __slots__ = ()
    OMIT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()
    OMIT_WHEN_EMPTY: ClassVar[frozenset[str]] = frozenset()
    NOT_IN_JSON: ClassVar[frozenset[str]] = frozenset()
    JSON_KEYS: ClassVar[Mapping[str, str]] = {}
    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ()
    JSON_INLINE: ClassVar[frozenset[str]] = frozenset()
    JSON_ROUND: ClassVar[Mapping[str, int]] = {}

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, f.name)
            if f.name in self.NOT_IN_JSON or (value is None and f.name in self.OMIT_WHEN_NONE):
                continue
            if f.name in self.OMIT_WHEN_EMPTY and not value:
                continue
            if f.name in self.JSON_INLINE:
                if value is not None:
                    out.update(value.to_json())
                continue
            if f.name in self.JSON_ROUND and value is not None:
                value = round(value, self.JSON_ROUND[f.name])
            out[self.JSON_KEYS.get(f.name, f.name)] = json_value(value)
        for name in self.JSON_PROPERTIES:
            out[name] = json_value(getattr(self, name))
        return out


def json_value(value: object) -> object:
    """A value inside a record as JSON: records by their `to_json()`, lists, tuples and dicts item by item."""
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value
