"""The web UI's security (issue 33, F25, F24). The cross-origin rule (avv_harness/locust/web_guard.py): Locust's
``CORS(app)`` answers every Origin with ``Access-Control-Allow-Origin: <origin>``; with our plugin no route gives a
foreign origin any CORS header, a foreign page's POST (``/swarm``, ``/stop``), preflight or subresource request is
refused, and an allow-listed origin (``--avv-cors-origin``) is granted. The login (avv_harness/locust/web_login.py):
``--web-login`` with ``AVV_WEB_PASSWORD`` puts every route behind one user's password. In-process: Locust's web UI
on an Environment, driven with Flask's test client; one integration test over real HTTP on loopback."""

from __future__ import annotations

import json
import logging
import sys
import urllib.error
import urllib.parse
import urllib.request

import gevent
import pytest

from avv_core.errors import InputError
from avv_harness.locust import web_login
from avv_harness.locust.web_guard import refusal
from avv_harness.locust.web_ui import install_web_ui
from avv_harness.run.options import parse_origins
from tests.builders import write_inputs
from tests.glue import make_env

EVIL = "http://evil.example"
DASH = "https://dash.example"
#: Every route the issue names, and the ones that act: (method, path).
READS = [("GET", "/"), ("GET", "/stats/requests"), ("GET", "/avv/live.json"), ("GET", "/avv/metrics"),
         ("GET", "/avv/download/records.csv"), ("GET", "/no/such/route")]
ACTS = [("POST", "/swarm"), ("POST", "/stop"), ("POST", "/stats/reset"), ("PUT", "/avv/live.json")]


@pytest.fixture(autouse=True)
def locust_argv(monkeypatch):
    """Locust's web UI parses sys.argv for its form's extra options: give it a plain command line."""
    monkeypatch.setattr(sys, "argv", ["locust"])


@pytest.fixture
def ui(tmp_path, request):
    """A web UI (no socket) allowing the origins the test passes (indirect parameter; default none), and its
    controller."""
    extra = [arg for origin in getattr(request, "param", ()) for arg in ("--avv-cors-origin", origin)]
    config, samples = write_inputs(tmp_path, {"a": {}, "b": {}}, n_samples=2)
    env, ctl = make_env(["--avv-config", str(config), "--avv-samples", str(samples), "--avv-out",
                         str(tmp_path / "out"), *extra])
    env.create_web_ui("127.0.0.1", 0, delayed_start=True)
    install_web_ui(env, ctl)
    yield env.web_ui.app.test_client(), ctl
    env.runner.quit()


def cors(response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


def preflight(origin: str, method: str = "POST") -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": method,
            "Access-Control-Request-Private-Network": "true"}  # Chrome's Private Network Access, to loopback


def test_a_foreign_origin_reads_no_cors_header_from_any_route(ui):
    client, _ = ui
    for method, path in READS:
        response = client.open(path, method=method, headers={"Origin": EVIL})
        assert cors(response) == {}, (path, response.status_code, cors(response))
        assert response.status_code in (200, 404), path  # served (the browser hides it from the foreign page)
    assert client.get("/avv/live.json", headers={"Origin": EVIL}).get_json()["vendors"] is not None


def test_a_foreign_page_cannot_start_stop_or_reset_a_run(ui):
    client, ctl = ui
    for method, path in ACTS:
        response = client.open(path, method=method, headers={"Origin": EVIL},
                               data={"user_count": "1", "spawn_rate": "1"})
        assert response.status_code == 403 and cors(response) == {}, (path, response.status_code)
        assert "refused" in response.get_data(as_text=True) and "--avv-cors-origin" in response.get_data(as_text=True)
    assert ctl.run is None and not ctl.runs  # no run was started
    for origin in ("null", "http://127.0.0.1:9999", "http://localhost.evil.example"):  # sandboxed; other port
        assert client.post("/swarm", headers={"Origin": origin}).status_code == 403, origin


def test_a_foreign_preflight_is_not_granted(ui):
    client, _ = ui
    for path in ("/swarm", "/stop", "/avv/live.json", "/"):
        response = client.options(path, headers=preflight(EVIL))
        assert response.status_code == 403 and cors(response) == {}, (path, cors(response))


def test_a_page_on_another_site_cannot_embed_or_fetch_it_but_a_link_opens_it(ui):
    client, _ = ui
    image = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
    assert client.get("/stats/requests/csv", headers=image).status_code == 403  # <img src=…/stats/…/csv>
    assert client.get("/avv/live.json", headers={**image, "Sec-Fetch-Site": "same-site"}).status_code == 403
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    assert client.get("/", headers=link).status_code == 200  # the operator follows a link to the UI


def test_the_uis_own_pages_and_non_browser_clients_work_as_before(ui):
    client, _ = ui
    own = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
    assert client.get("/stats/requests", headers=own).status_code == 200
    assert client.post("/stop", headers=own).status_code == 200  # the UI's own STOP (no run: nothing to stop)
    assert client.get("/avv/metrics").status_code == 200  # Prometheus: no Origin, no Sec-Fetch
    assert client.get("/stats/requests").status_code == 200 and cors(client.get("/")) == {}


@pytest.mark.parametrize("ui", [(DASH, "http://127.0.0.1:3000")], indirect=True)
def test_an_allow_listed_origin_is_granted(ui):
    client, _ = ui
    response = client.get("/avv/live.json", headers={"Origin": DASH})
    assert response.status_code == 200 and cors(response)["Access-Control-Allow-Origin"] == DASH
    granted = client.options("/swarm", headers=preflight(DASH))
    assert granted.status_code == 200 and granted.headers["Access-Control-Allow-Origin"] == DASH
    assert "POST" in granted.headers["Access-Control-Allow-Methods"]
    assert client.post("/stop", headers={"Origin": "http://127.0.0.1:3000"}).status_code == 200
    evil = client.get("/avv/live.json", headers={"Origin": EVIL})  # the list is not "anyone"
    assert cors(evil) == {} and client.post("/stop", headers={"Origin": EVIL}).status_code == 403


def test_the_rule_as_a_pure_function():
    none: frozenset[str] = frozenset()
    assert refusal("GET", {"origin": EVIL, "host": "127.0.0.1:8089"}, none) is None  # served, headers removed
    assert refusal("POST", {"origin": EVIL, "host": "127.0.0.1:8089"}, none) is not None
    assert refusal("POST", {"origin": "http://127.0.0.1:8089", "host": "127.0.0.1:8089"}, none) is None
    assert refusal("POST", {"origin": "https://ui.example", "host": "ui.example"}, none) is None  # TLS proxy
    assert refusal("POST", {"origin": "http://127.0.0.1:8089", "host": "localhost:8089"}, none) is not None
    assert refusal("POST", {"host": "127.0.0.1:8089"}, none) is None  # curl, scripts: no Origin
    assert refusal("PUT", {"origin": DASH, "host": "x"}, frozenset({DASH})) is None
    assert refusal("OPTIONS", {"origin": EVIL, "host": "x"}, none) is None  # not a preflight: no CORS answer
    assert refusal("OPTIONS", {"origin": EVIL, "host": "x", "access-control-request-method": "GET"}, none)
    assert refusal("HEAD", {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}, none) is None
    assert refusal("POST", {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}, none)  # a form post


@pytest.mark.parametrize("given, origins", [
    (["https://Dash.Example:443/"], ("https://dash.example",)),
    (["http://127.0.0.1:3000,http://localhost:3000"], ("http://127.0.0.1:3000", "http://localhost:3000")),
    (["[https://a.example, 'http://b.example:8080']"], ("https://a.example", "http://b.example:8080")),
    (["http://[::1]:3000", "http://[::1]:3000"], ("http://[::1]:3000",)),
    (None, ()),
])
def test_allow_list_values_become_what_browsers_send(given, origins):
    assert parse_origins(given) == origins


@pytest.mark.parametrize("bad", ["*", "dash.example", "https://dash.example/path", "ftp://x.example",
                                 "https://user@dash.example", "https://dash.example:99999", "https://dash.example?q"])
def test_allow_list_refuses_what_is_not_an_origin(bad):
    with pytest.raises(InputError, match="--avv-cors-origin"):
        parse_origins([bad])


# ------------------------------------------------------------------ the login (--web-login, AVV_WEB_PASSWORD)

PASSWORD = "correct horse battery staple"


@pytest.fixture
def login_ui(tmp_path, monkeypatch):
    monkeypatch.setenv(web_login.PASSWORD_ENV, PASSWORD)
    monkeypatch.setattr(web_login, "FAIL_DELAY_S", 0.0)
    config, samples = write_inputs(tmp_path, {"a": {}}, n_samples=2)
    env, ctl = make_env(["--avv-config", str(config), "--avv-samples", str(samples), "--avv-out",
                         str(tmp_path / "out"), "--web-login"])
    env.create_web_ui("127.0.0.1", 0, delayed_start=True, web_login=True)
    install_web_ui(env, ctl)
    yield env.web_ui.app.test_client()
    env.runner.quit()


def test_with_web_login_every_route_needs_the_password(login_ui):
    client = login_ui
    for path in ("/", "/stats/requests", "/avv/live.json", "/avv/metrics", "/avv/download/records.csv"):
        response = client.get(path)
        assert response.status_code == 302 and "/login" in response.headers["Location"], path
    assert client.post("/swarm", data={"user_count": "1"}).status_code == 302
    login_page = client.get("/login").get_data(as_text=True)
    assert "/avv/login" in login_page  # Locust's form posts to our handler
    wrong = client.post("/avv/login", data={"username": "avv", "password": PASSWORD + "x"})
    assert wrong.status_code == 302 and wrong.headers["Location"].endswith("/login")
    assert client.get("/avv/live.json").status_code == 302
    assert client.post("/avv/login", data={"username": "root", "password": PASSWORD}).status_code == 302
    assert client.get("/avv/live.json").status_code == 302
    right = client.post("/avv/login", data={"username": "avv", "password": PASSWORD})
    cookie = right.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie  # no --tls-cert
    assert client.get("/avv/live.json").status_code == 200 and client.get("/").status_code == 200
    evil = client.post("/avv/login", headers={"Origin": EVIL}, data={"username": "avv", "password": PASSWORD})
    assert evil.status_code == 403  # a foreign page cannot log the browser in either


def test_login_settings_refuse_a_short_password_and_leave_no_password_to_your_handler():
    assert web_login.login_settings({}) is None
    assert web_login.login_settings({web_login.PASSWORD_ENV: PASSWORD}) == ("avv", PASSWORD)
    assert web_login.login_settings({web_login.PASSWORD_ENV: PASSWORD, web_login.USER_ENV: "ops"}) == ("ops", PASSWORD)
    with pytest.raises(InputError, match="AVV_WEB_PASSWORD: at least 12 characters"):
        web_login.login_settings({web_login.PASSWORD_ENV: "hunter2"})


def test_web_login_without_a_password_is_left_to_your_handler_and_a_lone_password_is_named(tmp_path, monkeypatch,
                                                                                         caplog):
    caplog.set_level(logging.INFO, logger="avv")
    config, samples = write_inputs(tmp_path, {"a": {}}, n_samples=2)
    env, _ = make_env(["--avv-config", str(config), "--avv-samples", str(samples)])
    env.create_web_ui("127.0.0.1", 0, delayed_start=True, web_login=True)
    try:
        monkeypatch.delenv(web_login.PASSWORD_ENV, raising=False)
        assert web_login.install_login(env.web_ui, "", {}) is False
        assert "the login handler must come from your locustfile" in caplog.text
        env.web_ui.web_login = False
        assert web_login.install_login(env.web_ui, "", {web_login.PASSWORD_ENV: PASSWORD}) is False
        assert "AVV_WEB_PASSWORD is set but --web-login is not" in caplog.text and PASSWORD not in caplog.text
    finally:
        env.runner.quit()


# ------------------------------------------------------------------ integration: real HTTP over loopback


def _http(url: str, method: str = "GET", headers: dict[str, str] | None = None,
          data: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


@pytest.mark.integration  # an in-process Locust run with its web UI on a loopback port: seconds
def test_over_http_a_foreign_page_gets_nothing_and_the_operator_runs_as_before(tmp_path):
    config, samples = write_inputs(tmp_path, {"a": {}, "b": {}}, n_samples=3)
    env, ctl = make_env(["--avv-config", str(config), "--avv-samples", str(samples), "--avv-out",
                         str(tmp_path / "out"), "--avv-start-jitter-s", "0", "--avv-cors-origin", DASH])
    env.create_web_ui("127.0.0.1", 0)
    install_web_ui(env, ctl)
    try:
        gevent.sleep(0.1)
        base = f"http://127.0.0.1:{env.web_ui.server.server_port}"
        form = {"user_count": "1", "spawn_rate": "1", "host": ""}
        for path in ("/", "/stats/requests", "/avv/live.json", "/avv/metrics"):
            status, headers, _ = _http(base + path, headers={"Origin": EVIL})
            assert status == 200 and not [k for k in headers if k.lower().startswith("access-control-")], path
        status, headers, _ = _http(base + "/swarm", "OPTIONS", preflight(EVIL))
        assert status == 403 and "Access-Control-Allow-Origin" not in headers
        status, _, _ = _http(base + "/swarm", "POST", {"Origin": EVIL}, form)
        assert status == 403 and not ctl.runs
        status, headers, _ = _http(base + "/avv/live.json", headers={"Origin": DASH})
        assert status == 200 and headers["Access-Control-Allow-Origin"] == DASH
        status, _, answer = _http(base + "/swarm", "POST", {"Origin": base}, form)  # the UI's own START
        assert status == 200 and json.loads(answer)["success"] is True
        shape = env.runner.shape_greenlet
        assert shape is not None
        shape.join(timeout=30)
        assert len(ctl.runs) == 1 and (ctl.runs[0].run_dir / "records.csv").is_file()
    finally:
        env.runner.quit()
        env.web_ui.stop()
