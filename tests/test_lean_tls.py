"""TLS at the cost of plain TCP (issue 39): the lean client reads HTTPS as it reads plain TCP (OpenSSL over memory
buffers on its own raw socket, avv_harness/wire/lean.py), against the simulator serving HTTPS with a self-signed
certificate made at run time (``avv-sim --tls-cert/--tls-key``, avv_sim/tls.py). Certificate verification as
requests does it: an unknown CA or a host name the certificate does not name fails the connection (``connect``,
never a vendor answer), the CA given by ``REQUESTS_CA_BUNDLE`` or the session's ``verify`` is trusted, ``verify``
False trusts anything. A vendor's ``tls_verify`` in the config (its CA file, or false) is its users' session
``verify`` and wins over ``REQUESTS_CA_BUNDLE``, in a Locust run too (the config errors: tests/test_vendor_tls.py).
What the client reads over TLS is what it reads over plain TCP (attempt by attempt, and a Locust run's records.csv),
TLS sessions are resumed across connections, and the connection-reuse property test (tests/test_connection_reuse.py)
holds over TLS too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import certifi
import pytest
import requests

from avv_core.exit_status import ExitStatus
from avv_core.record_file import read_records
from avv_harness.inputs.config import load_config
from avv_harness.run.controller import default_session
from avv_harness.wire import lean
from avv_harness.wire.execute import attempt_record, vendor_session
from avv_harness.wire.stream import stream_chat
from avv_sim import start_simulator
from avv_sim.tls import can_make_certificate, make_certificate, server_context
from tests.builders import chat_body, sim_config, sim_vendors, vendor_entry, vendors_config, write_yaml
from tests.locust_runs import DEMO_SAMPLES, clean_env, only_run_dir, run_locust
from tests.sim_records import truth_lines
from tests.test_connection_reuse import Vendor, each_record_holds_its_own_bytes
from tests.wire_clients import client_session, current

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("wire_client"),
              pytest.mark.skipif(not can_make_certificate(), reason="no openssl to make a certificate"),
              pytest.mark.filterwarnings("ignore:Unverified HTTPS request")]  # urllib3's, with verify False

PROFILE = {"ttft_ms": 5, "tokens_per_s": 200, "output_tokens": 12, "tool_call_rate": 0.5, "seed": 3}
HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
#: Record fields that are times or depend on the process (everything else must be equal, plain or TLS).
TIMING = {"t0_monotonic", "ttfb_ms", "ttft_ms", "latency_ms", "decode_ms", "wall_ms", "tps", "started_at", "worker",
          "client_lag_ms", "client_cpu_pct"}
#: The one anomaly judged on times: a client descheduled for a whole answer on a loaded machine reads it at once.
TIMED_ANOMALY = "buffered_stream"


def untimed_anomalies(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return ";".join(a for a in value.split(";") if a != TIMED_ANOMALY) or None


def untimed(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its times: what must be equal whether read over plain TCP or TLS."""
    out = {k: v for k, v in record.items() if k not in TIMING}
    out["anomalies"] = untimed_anomalies(out.get("anomalies"))
    return out


@pytest.fixture(autouse=True)
def no_ca_from_the_environment(monkeypatch):
    """``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` set the CA of a session that sets none (a vendor without
    ``tls_verify``): the tests set the CA themselves."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def sims(certificate, tmp_path_factory):
    """The same profile served over plain TCP and over HTTPS (two simulators, each with its truth log)."""
    folder = tmp_path_factory.mktemp("sims")
    with start_simulator(profiles={"p": PROFILE}, truth_log=folder / "plain.jsonl") as plain, \
            start_simulator(profiles={"p": PROFILE}, truth_log=folder / "tls.jsonl", tls=certificate) as tls:
        assert plain.url.startswith("http://") and tls.url.startswith("https://")
        yield {"plain": plain, "tls": tls}


def url_of(sim) -> str:
    return sim.base_url("p") + "/chat/completions"


def send(session: requests.Session, url: str, n: int = 0):
    body = chat_body(f"say something #{n}", stream=True, include_usage=True)
    return stream_chat(session, url, json.dumps(body).encode(), HEADERS, 5.0, 10.0)


def test_an_unknown_ca_fails_the_connection_and_sends_nothing(sims):
    before = len(truth_lines(sims["tls"].truth_log))
    with client_session() as session:
        att = send(session, url_of(sims["tls"]))
    assert att.error_kind == "connect" and "CERTIFICATE_VERIFY_FAILED" in att.error_detail, att.error_detail
    assert att.http_status is None and not att.content
    assert len(truth_lines(sims["tls"].truth_log)) == before  # no request reached the vendor


def test_a_host_name_the_certificate_does_not_name_fails(sims, certificate):
    """The certificate names IP 127.0.0.1 only: ``localhost`` is another name, even with its CA trusted."""
    with client_session() as session:
        session.verify = str(certificate[0])
        att = send(session, url_of(sims["tls"]).replace("127.0.0.1", "localhost"))
    assert att.error_kind == "connect" and "CERTIFICATE_VERIFY_FAILED" in att.error_detail, att.error_detail


@pytest.mark.parametrize("how", ["environment", "session", "no verification"])
def test_the_configured_ca_or_no_verification_is_trusted(sims, certificate, monkeypatch, how):
    with client_session() as session:
        if how == "environment":
            monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate[0]))
        else:
            session.verify = str(certificate[0]) if how == "session" else False
        att = send(session, url_of(sims["tls"]))
    assert att.ok and att.saw_done and att.content, (att.error_kind, att.error_detail)


def test_what_is_read_over_tls_is_what_is_read_over_plain_tcp(sims, certificate):
    """Attempt by attempt (the same requests to the same profile), on three kept-alive streams per transport."""
    records = {}
    for transport, sim in sims.items():
        with client_session() as session:
            session.verify = str(certificate[0])
            records[transport] = [attempt_record(send(session, url_of(sim), n), True) for n in range(12)]
    for plain, tls in zip(records["plain"], records["tls"], strict=True):
        assert plain["status"] == "success", plain
        assert untimed(tls) == untimed(plain)


def test_a_kept_connection_carries_the_next_request_and_a_new_one_resumes_the_tls_session(sims, certificate):
    if current["client"] != "lean":
        pytest.skip("the lean client's own connections (requests keeps urllib3's)")
    url = url_of(sims["tls"])
    with default_session("lean") as first:
        first.verify = str(certificate[0])
        assert send(first, url, 1).ok
        adapter = first.get_adapter(url)
        assert isinstance(adapter, lean.LeanAdapter)
        (conn,) = [c for conns in adapter.idle.values() for c in conns]
        assert send(first, url, 2).ok
        assert [c for conns in adapter.idle.values() for c in conns] == [conn]  # the same connection, reused
    with default_session("lean") as second:  # a new session: a new connection, the kept TLS session resumed
        second.verify = str(certificate[0])
        assert send(second, url, 3).ok
        (other,) = [c for conns in second.get_adapter(url).idle.values() for c in conns]
    assert other is not conn and other.tls is not None and other.tls.session_reused


def test_no_record_ever_holds_another_responses_bytes_over_tls(certificate):
    """tests/test_connection_reuse.py over HTTPS: stray bytes, responses and closes on an idle TLS connection
    (decrypted, or still ciphertext) never reach the next item."""
    session = client_session()
    session.verify = str(certificate[0])
    assert each_record_holds_its_own_bytes(Vendor(server_context(*certificate)), session, 300) > 300


def test_a_locust_run_over_tls_records_what_a_plain_run_records(sims, certificate, tmp_path):
    """One Locust run, two vendors of the same profile: ``plain`` on the module's plain-TCP simulator, ``tls`` on its
    HTTPS twin (its certificate trusted through ``REQUESTS_CA_BUNDLE``): the tls vendor's records equal the plain
    one's but for times and the vendor's name. (One run instead of a plain and a TLS run: the simulator's answers
    hang on the request and the profile only; the embedded simulator serving HTTPS is checked in
    test_a_locust_run_checks_each_vendors_certificate_as_its_tls_verify_says.)"""
    write_yaml(tmp_path / "vendors.yaml", vendors_config([
        vendor_entry(name, sims[name].base_url("p"), model_id="m", concurrency=4, timeout_s=15,
                     is_baseline=name == "plain") for name in ("plain", "tls")]))
    proc = run_locust(["--headless", "--avv-config", "vendors.yaml", "--avv-samples", str(DEMO_SAMPLES), "--avv-out",
                       "out", "--avv-run-id", "r", "--avv-retries", "0", "--avv-no-score"], cwd=tmp_path,
                      env=clean_env(LOCUST_AVV_CLIENT=current["client"], REQUESTS_CA_BUNDLE=str(certificate[0])))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = read_records(only_run_dir(tmp_path / "out") / "records.csv")
    records = records.drop(columns=sorted(TIMING & set(records.columns)))
    records["anomalies"] = records["anomalies"].map(untimed_anomalies).astype(records["anomalies"].dtype)
    frames = {name: part.drop(columns=["vendor", "is_baseline"]).sort_values(["sample_id", "repeat"])
              .reset_index(drop=True) for name, part in records.groupby("vendor")}
    assert set(frames) == {"plain", "tls"} and len(frames["plain"]) == len(DEMO_SAMPLES.read_text().splitlines())
    assert (frames["plain"]["status"] == "success").all()
    assert frames["tls"].equals(frames["plain"]), frames["tls"].compare(frames["plain"])


def vendor_ca(certificate, folder: Path) -> str:
    """The simulator's certificate copied next to a config in ``folder``: the path a config names, relative."""
    (folder / "certs").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(certificate[0], folder / "certs" / "sim.pem")
    return "certs/sim.pem"


@pytest.mark.parametrize("tls_verify", ["absent", "its CA file", False])
def test_a_vendors_tls_verify_is_what_the_client_checks_the_certificate_against(sims, certificate, tmp_path,
                                                                                monkeypatch, tls_verify):
    """The config's key, through the user's session (``vendor_session``): absent, the self-signed certificate is
    refused (the default CAs); the vendor's CA file, or false, is trusted, although ``REQUESTS_CA_BUNDLE`` names
    other CAs (the vendor's setting wins)."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certifi.where())
    own = {} if tls_verify == "absent" else {"tls_verify": vendor_ca(certificate, tmp_path) if tls_verify else False}
    write_yaml(tmp_path / "vendors.yaml", vendors_config([
        vendor_entry("v", sims["tls"].base_url("p"), is_baseline=True, **own)]))
    (vendor,) = load_config(tmp_path / "vendors.yaml", env={}).vendors
    before = len(truth_lines(sims["tls"].truth_log))
    with vendor_session(client_session, vendor) as session:
        att = send(session, vendor.url + "/chat/completions")
    if tls_verify == "absent":
        assert att.error_kind == "connect" and "CERTIFICATE_VERIFY_FAILED" in att.error_detail, att.error_detail
        assert len(truth_lines(sims["tls"].truth_log)) == before
    else:
        assert att.ok and att.saw_done and att.content, (att.error_kind, att.error_detail)
        assert len(truth_lines(sims["tls"].truth_log)) == before + 1


#: Three vendors of the embedded simulator over HTTPS: its certificate trusted as ``own_ca``'s CA, not checked for
#: ``unchecked``, and the default CAs (which do not hold it) for ``default``.
TLS_VENDORS = ("own_ca", "unchecked", "default")


def run_with_tls_vendors(certificate, work: Path, *args: str):
    """A Locust run of :data:`TLS_VENDORS` (``--avv-preflight warn``: the default vendor is sent items, and the
    circuit breaker stops it); its process and run folder."""
    write_yaml(work / "sim.yaml", sim_config({name: PROFILE for name in TLS_VENDORS}))
    write_yaml(work / "vendors.yaml", sim_vendors("m", list(TLS_VENDORS), "own_ca",
                                                  own_ca={"tls_verify": vendor_ca(certificate, work), "concurrency": 2},
                                                  unchecked={"tls_verify": False, "concurrency": 2}))
    env = clean_env(LOCUST_AVV_CLIENT=current["client"], AVV_SIM_TLS_CERT=str(certificate[0]),
                    AVV_SIM_TLS_KEY=str(certificate[1]), REQUESTS_CA_BUNDLE=certifi.where())
    proc = run_locust(["--headless", *args, "--avv-config", "vendors.yaml", "--avv-sim-config", "sim.yaml",
                       "--avv-samples", str(DEMO_SAMPLES), "--avv-out", "out", "--avv-run-id", "r",
                       "--avv-retries", "0", "--avv-preflight", "warn", "--avv-no-score"], cwd=work, env=env)
    return proc, only_run_dir(work / "out")


def each_vendor_is_checked_as_its_config_says(proc, run_dir: Path, work: Path) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode == ExitStatus.VENDOR_BROKEN, output[-3000:]  # `default`, stopped by the breaker
    records = read_records(run_dir / "records.csv")
    by_vendor = {name: frame for name, frame in records.groupby("vendor")}
    for name in ("own_ca", "unchecked"):
        assert len(by_vendor[name]) == 32 and (by_vendor[name]["status"] == "success").all(), name
    refused = by_vendor["default"]
    assert len(refused) >= 1 and (refused["error_kind"] == "connect").all()
    assert refused["error_detail"].str.contains("CERTIFICATE_VERIFY_FAILED").all(), refused["error_detail"].iloc[0]
    warnings = [line for line in output.splitlines() if "tls_verify: false" in line]
    assert len(warnings) == 1 and "m/unchecked" in warnings[0] and "default" not in warnings[0], warnings
    assert "InsecureRequestWarning" not in output  # urllib3's, on every request of the requests client
    shown = {v["name"]: v.get("tls_verify", True) for v in json.loads((run_dir / "run.json").read_text())["vendors"]}
    assert shown == {"own_ca": str((work / "certs" / "sim.pem").resolve()), "unchecked": False, "default": True}


def test_a_locust_run_checks_each_vendors_certificate_as_its_tls_verify_says(certificate, tmp_path):
    proc, run_dir = run_with_tls_vendors(certificate, tmp_path)
    each_vendor_is_checked_as_its_config_says(proc, run_dir, tmp_path)
    # the embedded simulator serving HTTPS (AVV_SIM_TLS_CERT/_KEY, as bench/measure.py --transports tls starts it)
    assert json.loads((run_dir / "run.json").read_text())["simulator"]["url"].startswith("https://")
    assert "pre-flight (a hard fault" in proc.stdout and "tls_verify" in proc.stdout  # the check names the key
