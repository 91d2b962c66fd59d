"""Walking JSON Schemas in tests."""

from __future__ import annotations

from typing import Any


def schema_property_names(schema: Any) -> set[str]:
    """Every property name anywhere in a JSON schema, nested objects and arrays included."""
    names: set[str] = set()
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            names.update(properties)
        for value in schema.values():
            names |= schema_property_names(value)
    elif isinstance(schema, list):
        for value in schema:
            names |= schema_property_names(value)
    return names
