"""Request headers: one rule for whose header is sent, the same for both clients (wire-client layer, pure).

Names are compared case-insensitively and one header of each name is sent. From lowest to highest precedence:
the client's own (``User-Agent``, ``Content-Type``, ``Accept``, ``Accept-Encoding: identity``, the wire format's
defaults such as ``anthropic-version``), the vendor's key (``Authorization: Bearer …`` or the format's header),
the URL's ``user:password@`` (``Authorization: Basic …``, as requests sends it; the URL itself is sent without
it), the vendor's ``headers:``, then ``--avv-header``: the later one replaces the earlier, keeping its own
spelling. ``Host`` may be set (it replaces the URL's host in the request, not the address connected to). The
headers that frame the request on the wire and the harness's item tags (:mod:`avv_core.http_headers`) are
the client's: a config naming them is refused at start-up, and a request carrying one is the client's error.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from avv_core.http_headers import FRAMING, RESERVED, refused_header

__all__ = ["FRAMING", "RESERVED", "basic_auth", "check_request_headers", "merge_headers", "refused_header",
           "with_url_auth", "without_userinfo"]


def merge_headers(*layers: Mapping[str, str]) -> dict[str, str]:
    """The layers' headers, later layers winning, names compared case-insensitively (the winner's spelling)."""
    out: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for layer in layers:
        for name, value in layer.items():
            lowered = name.lower()
            old = spelled.get(lowered)
            if old is not None:
                del out[old]
            spelled[lowered] = name
            out[name] = value
    return out


def check_request_headers(headers: Mapping[str, str]) -> None:
    """ValueError naming a framing header a request may not carry (the client writes those)."""
    for name in headers:
        if name.lower() in FRAMING:
            raise ValueError(f"header {name!r} is written by the client itself")


def basic_auth(url: str) -> str | None:
    """``Authorization: Basic …`` for a URL with ``user:password@`` (percent-decoded, as requests does), or None."""
    if "@" not in url:
        return None
    parts = urlsplit(url)
    if parts.username is None:
        return None
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()  # as secrets.url_secrets hides it
    return "Basic " + base64.b64encode(pair).decode("ascii")


def without_userinfo(url: str) -> str:
    """The URL without its ``user:password@`` (the credentials travel as Basic auth, never in the request line)."""
    if "@" not in url:
        return url
    parts = urlsplit(url)
    if parts.username is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def with_url_auth(url: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """(the URL to send, the headers to send) for a request to ``url``: its ``user:password@`` as Basic auth unless
    ``headers`` carry an ``Authorization`` of their own (module docstring: those win)."""
    auth = basic_auth(url)
    if auth is None:
        return url, headers
    if not any(name.lower() == "authorization" for name in headers):
        headers = {**headers, "Authorization": auth}
    return without_userinfo(url), headers
