"""Throwaway PostgreSQL databases for the tests that need a server (skipped when none is reachable).

``MEMOREE_TEST_PG_URL`` names a server the tests may create and drop databases on (``.ci/run``
starts one on loopback). Each test gets its own fresh database, dropped afterwards.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

__all__ = ["admin_url", "fresh_database", "require_pg"]

SKIP_REASON = ("PostgreSQL store tests need a server: set MEMOREE_TEST_PG_URL "
               "(e.g. postgresql://postgres@127.0.0.1:5432/postgres); .ci/run starts one")


def admin_url() -> str | None:
    return os.environ.get("MEMOREE_TEST_PG_URL") or None


def require_pg() -> str:
    """The admin URL, or skip the test with the reason when no server is reachable."""
    url = admin_url()
    if url is None:
        pytest.skip(SKIP_REASON)
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=5).close()
    except Exception as exc:  # any failure to reach the server skips with the cause
        pytest.skip(f"{SKIP_REASON}; {url} is unreachable: {exc}")
    return url


def _with_database(url: str, name: str) -> str:
    """The same server URL naming another database."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@contextmanager
def fresh_database() -> Iterator[str]:
    """Create an empty database, yield its URL, drop it (closing any leftover sessions)."""
    import psycopg

    url = require_pg()
    name = f"memoree_t_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
