"""A fixture for tests of the stores' contract: each test runs on every kind of store."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(name="store_url", params=["memory", "sqlite", "postgres"])
def store_url_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a new, empty store: in memory, a SQLite file, a fresh PostgreSQL database.

    A module using it also imports ``fresh_postgres_url_fixture`` from ``tests._postgres``.
    """
    if request.param == "memory":
        return "memory"
    if request.param == "postgres":
        url: str = request.getfixturevalue("fresh_postgres_url")
        return url
    return f"sqlite:///{tmp_path / 'state.db'}"
