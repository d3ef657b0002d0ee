"""The web UI's cross-origin rule (harness layer, Locust glue): no other web site may read the UI or act on it.

Locust's web UI calls ``flask_cors.CORS(app)`` (locust/web.py): every response, ``/avv/*`` included, answers any
``Origin`` with ``Access-Control-Allow-Origin: <that origin>`` (and a Private Network Access preflight with
``Access-Control-Allow-Private-Network: true``), so a page the operator opens in a browser could read a
loopback-bound UI's live scores and records, and POST ``/swarm`` to start runs with the operator's keys. A form
POST needs no CORS at all (it is a "simple" request), so removing the headers alone would not stop it.

:class:`OriginGuard` wraps the Flask app's WSGI callable, so it sees every response, error pages included,
whatever Locust or flask-cors do inside:

- **Headers.** ``Access-Control-*`` response headers are kept only for an origin in the allow-list
  (``--avv-cors-origin``); for every other request they are removed (a browser then hides the answer from the
  foreign page).
- **Refused (403)** — :func:`refusal`, a pure function:
  a state-changing request (any method but GET / HEAD) or a CORS preflight whose ``Origin`` is neither this UI
  (its host and port, as the request's ``Host`` names them) nor allow-listed; and a request a browser marks as
  coming from another site (``Sec-Fetch-Site: cross-site`` or ``same-site``, i.e. another port or subdomain)
  that is not a top-level navigation — an ``<img src=…/stop>`` or a no-cors ``fetch`` from another page.
  A request without these headers (curl, scripts, Prometheus) is served as before.

docs/how-to/security.md says what this protects and what it does not (DNS rebinding, anyone who can reach the
port directly: that is binding and ``--web-login``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # the WSGI types (PEP 3333) as typeshed declares them: for the type checker only
    from _typeshed import OptExcInfo
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

#: Methods a browser sends cross-origin without side effects expected (the others need the origin checked).
SAFE_METHODS = frozenset({"GET", "HEAD"})
#: ``Sec-Fetch-Site`` values of a request another page made (ports and subdomains are "same-site").
OTHER_SITE = frozenset({"cross-site", "same-site"})


def _netloc(origin: str) -> str:
    parts = urlsplit(origin)
    return (parts.netloc or "").lower()


def is_own_origin(origin: str, host: str) -> bool:
    """``origin`` names the host and port the request was sent to (the ``Host`` header). The scheme is not
    compared: behind a TLS proxy the browser's ``https://`` origin reaches the UI over plain HTTP."""
    return bool(host) and _netloc(origin) == host.lower()


def refusal(method: str, headers: dict[str, str], allowed: frozenset[str]) -> str | None:
    """Why a request is refused, or None. ``headers`` holds the request's ``origin``, ``host``,
    ``sec-fetch-site``, ``sec-fetch-mode`` and ``access-control-request-method`` (lower-case names, missing
    when absent); ``allowed`` the allow-listed origins (``--avv-cors-origin``)."""
    origin = headers.get("origin")
    if origin is not None and origin in allowed:
        return None
    method = method.upper()
    preflight = method == "OPTIONS" and "access-control-request-method" in headers
    if origin is not None and not is_own_origin(origin, headers.get("host", "")):
        if preflight or method not in SAFE_METHODS | {"OPTIONS"}:
            return (f"cross-origin {'preflight' if preflight else method} from {origin} refused: it is not this "
                    f"web UI's origin (add it with --avv-cors-origin if it must be allowed)")
    site = headers.get("sec-fetch-site")
    if site in OTHER_SITE and not (headers.get("sec-fetch-mode") == "navigate" and method in SAFE_METHODS):
        return (f"{method} from another site (Sec-Fetch-Site: {site}) refused: only this web UI's own pages and "
                f"--avv-cors-origin origins may call it")
    return None


def _header(environ: WSGIEnvironment, name: str) -> str | None:
    value = environ.get("HTTP_" + name.upper().replace("-", "_"))
    return None if value is None else str(value)


class OriginGuard:
    """WSGI middleware applying the rule above around ``app`` (``flask_app.wsgi_app``)."""

    NAMES = ("origin", "host", "sec-fetch-site", "sec-fetch-mode", "access-control-request-method")

    def __init__(self, app: WSGIApplication, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(allowed)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        headers = {name: value for name in self.NAMES if (value := _header(environ, name)) is not None}
        reason = refusal(str(environ.get("REQUEST_METHOD", "GET")), headers, self.allowed)
        if reason is not None:
            body = (reason + "\n").encode()
            start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8"),
                                             ("Content-Length", str(len(body))), ("Vary", "Origin")])
            return [body]
        keep_cors = headers.get("origin") in self.allowed

        def filtered(status: str, response_headers: list[tuple[str, str]], *exc_info: OptExcInfo | None
                     ) -> Callable[[bytes], object]:
            if not keep_cors:
                response_headers = [(k, v) for k, v in response_headers
                                    if not k.lower().startswith("access-control-")]
            return start_response(status, response_headers, *exc_info)

        return self.app(environ, filtered)


def guard_web_ui(app: Any, allowed: Iterable[str] = ()) -> OriginGuard:
    """Wrap the Flask ``app``'s WSGI callable in an :class:`OriginGuard` (once; a second call replaces the
    allow-list). Takes effect for the next request, so it can be installed after the server started."""
    inner = app.wsgi_app.app if isinstance(app.wsgi_app, OriginGuard) else app.wsgi_app
    app.wsgi_app = OriginGuard(inner, allowed)
    return app.wsgi_app


__all__ = ["OTHER_SITE", "SAFE_METHODS", "OriginGuard", "guard_web_ui", "is_own_origin", "refusal"]
