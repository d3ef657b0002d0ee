"""A login for the web UI (harness layer, Locust glue): one user and password from the environment, for Locust's
``--web-login``.

Locust's ``--web-login`` puts its login page in front of every route (``/avv/*`` included), but ships no user
store: the login handler (a ``flask_login`` user loader and a route the form posts to) comes from a locustfile
(Locust docs, "Authentication"; ``examples/web_ui_auth``). With ``--web-login`` and :data:`PASSWORD_ENV` set,
this module is that handler: user :data:`USER_ENV` (default ``avv``), the password compared in constant time, a
failed attempt answered after :data:`FAIL_DELAY_S`, the session cookie ``HttpOnly``, ``SameSite=Lax`` and, with
``--tls-cert``, ``Secure``. Without :data:`PASSWORD_ENV`, ``--web-login`` is left to your own handler.

The password is read once at start and never logged; the Kubernetes base passes it from a Secret
(deploy/kubernetes/base/web-login.env). docs/how-to/security.md says what it protects and what it does not.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from avv_core.errors import InputError

if TYPE_CHECKING:
    from werkzeug.wrappers import Response

log = logging.getLogger("avv")

USER_ENV, PASSWORD_ENV, SECRET_KEY_ENV = "AVV_WEB_USER", "AVV_WEB_PASSWORD", "AVV_WEB_SECRET_KEY"
DEFAULT_USER = "avv"
#: Shorter passwords are refused at start: the login has no lockout, so a short one can be guessed.
MIN_PASSWORD = 12
#: A wrong user or password is answered this much later (online guessing gets slow; gevent: nothing blocks).
FAIL_DELAY_S = 1.0


def login_settings(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(user, password) from ``environ``, None when :data:`PASSWORD_ENV` is not set; InputError for a password
    that is too short."""
    password = environ.get(PASSWORD_ENV, "")
    if not password:
        return None
    if len(password) < MIN_PASSWORD:
        raise InputError(f"{PASSWORD_ENV}: at least {MIN_PASSWORD} characters (the login has no lockout; use a "
                         f"long random one, e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')")
    return environ.get(USER_ENV, "") or DEFAULT_USER, password


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def install_login(web_ui: Any, base: str, environ: Mapping[str, str], tls: bool = False) -> bool:
    """With ``--web-login`` (``web_ui.web_login``) and a password in ``environ``: the user loader, the form's
    target (``{base}/avv/login``) and the session settings. False when there is nothing to install (no
    ``--web-login``, or no password: your own handler)."""
    settings = login_settings(environ)
    if not web_ui.web_login:
        if settings is not None:
            log.warning("avv: %s is set but --web-login is not: the web UI has no login", PASSWORD_ENV)
        return False
    if settings is None:
        log.info("avv: --web-login without %s: the login handler must come from your locustfile", PASSWORD_ENV)
        return False
    user, password = settings
    import gevent
    from flask import Blueprint, redirect, request, session, url_for
    from flask_login import UserMixin, login_user  # type: ignore[import-untyped]

    class AuthUser(UserMixin):
        def __init__(self, name: str) -> None:
            self.id = name

    web_ui.login_manager.user_loader(lambda name: AuthUser(name) if _same(name, user) else None)
    app = web_ui.app
    app.config.setdefault("SECRET_KEY", None)
    if not app.config["SECRET_KEY"]:  # sessions survive a restart only with a fixed key
        app.config["SECRET_KEY"] = environ.get(SECRET_KEY_ENV) or secrets.token_bytes(32)
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_SECURE=tls)
    blueprint = Blueprint("avv_login", __name__, url_prefix=f"{base}/avv")

    @blueprint.route("/login", methods=["POST"])
    def login_submit() -> Response:
        name, given = request.form.get("username", ""), request.form.get("password", "")
        if _same(name, user) & _same(given, password):  # both compared, always
            login_user(AuthUser(user))
            return redirect(url_for("locust.index"))
        gevent.sleep(FAIL_DELAY_S)
        session["auth_error"] = "Invalid username or password"
        return redirect(url_for("locust.login"))

    app.register_blueprint(blueprint)
    web_ui.auth_args = {**web_ui.auth_args, "username_password_callback": f"{base}/avv/login"}
    log.info("avv: web UI login for user %r (%s)", user, PASSWORD_ENV)
    return True


__all__ = ["DEFAULT_USER", "FAIL_DELAY_S", "MIN_PASSWORD", "PASSWORD_ENV", "SECRET_KEY_ENV", "USER_ENV",
           "install_login", "login_settings"]
