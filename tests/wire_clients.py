"""The wire clients tests run against (issue 28): ``lean`` (the default) and ``requests`` (``--avv-client``).

Modules that build sessions themselves mark ``pytestmark = pytest.mark.usefixtures("wire_client")`` (conftest:
every test of them runs once per client) and call :func:`client_session`. Locust runs (in-process with real HTTP,
or subprocesses via tests/locust_runs.py) use ``AVV_TEST_CLIENT`` (default ``lean``): run a file once more with
``AVV_TEST_CLIENT=requests`` to run it on the other client.
"""

from __future__ import annotations

import os

import requests

from avv_harness.run.controller import default_session

CLIENTS = ("lean", "requests")
#: The client of this test (set per test by the ``wire_client`` fixture).
current = {"client": os.environ.get("AVV_TEST_CLIENT", "lean")}


def client_session() -> requests.Session:
    """A session as a Locust user gets one, for the client of the test."""
    return default_session(current["client"])
