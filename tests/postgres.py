"""The PostgreSQL server of the storage tests.

``make test`` starts one on loopback (tools/start_postgres.sh) and passes its URL in
``AUTOREC_TEST_POSTGRES_URL``; without it the tests that need a server are skipped, unless
``AUTOREC_REQUIRE_POSTGRES`` is set (CI), where that is a failure.
"""

import os

import pytest


def server_url() -> str:
    """The server's URL; skips the calling test (or fails it, where required) without one."""
    url = os.environ.get("AUTOREC_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("AUTOREC_REQUIRE_POSTGRES"):
            pytest.fail("AUTOREC_REQUIRE_POSTGRES is set but no server URL was given")
        pytest.skip("no PostgreSQL server (tools/start_postgres.sh starts one)")
    return url
