"""A vendor's ``tls_verify`` (issue 39), in-process: what the config accepts and refuses (naming the file and the
field), where a relative CA path is read from, and how the value reaches both clients (the user's session, whose
``verify`` wins over ``REQUESTS_CA_BUNDLE``); and the simulator's ``--tls-cert/--tls-key`` refusing files it cannot
load. tests/test_lean_tls.py runs both clients with the key against the simulator's HTTPS."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import certifi
import pytest
import requests

from avv_core.errors import InputError
from avv_harness.inputs.config import load_config
from avv_harness.wire.execute import vendor_session
from avv_harness.wire.requests_transport import environment_settings
from tests.builders import baseline_first, vendor_entry, vendors_config, write_yaml

URL = "https://127.0.0.1:9/v1"


def config_file(folder: Path, **tls) -> Path:
    """vendors.yaml in ``folder``: baseline ``a`` and ``b``, with ``tls[name]`` as that vendor's ``tls_verify``."""
    vendors = [vendor_entry(name, URL, require_key=False, **({"tls_verify": tls[name]} if name in tls else {}))
               for name in ("a", "b")]
    return write_yaml(folder / "vendors.yaml", vendors_config(baseline_first(vendors)))


def tls_of(path: Path) -> dict[str, bool | str]:
    return {v.name: v.tls_verify for v in load_config(path, env={}).vendors}


def a_ca_file(path: Path) -> Path:
    """A real PEM CA bundle (certifi's) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(certifi.where(), path)
    return path


@pytest.mark.parametrize("value, message", [
    ("certs/missing.pem", "m.vendors[1] (b).tls_verify: CA file or folder 'certs/missing.pem' not found (relative "
                          "paths are read from the config file's folder, "),
    (5, "m.vendors[1] (b).tls_verify: must be true, false or the path of a CA certificate file or folder, got 5"),
    ("", "m.vendors[1] (b).tls_verify: must be true, false or the path of a CA certificate file or folder"),
    ("not-a-cert.txt", "m.vendors[1] (b).tls_verify: 'not-a-cert.txt' holds no CA certificate OpenSSL can read"),
])
def test_a_bad_tls_verify_is_an_input_error_naming_the_file_and_the_field(tmp_path, value, message):
    (tmp_path / "not-a-cert.txt").write_text("this is no certificate\n")
    path = config_file(tmp_path, b=value)
    with pytest.raises(InputError) as refused:
        load_config(path, env={})
    assert f"{path}: {message}" in str(refused.value)


def test_a_relative_ca_path_is_read_from_the_config_files_folder_not_the_working_directory(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    ca = a_ca_file(folder / "ca" / "bundle.pem")
    path = config_file(folder, a="ca/bundle.pem", b="ca")  # a file, and a folder (OpenSSL's hashed layout)
    monkeypatch.chdir(tmp_path)  # ca/bundle.pem is not there
    assert tls_of(path) == {"a": str(ca.resolve()), "b": str(ca.parent.resolve())}
    assert tls_of(config_file(folder, a=str(ca))) == {"a": str(ca.resolve()), "b": True}  # absolute as written


def test_absent_is_the_default_cas_and_false_is_kept_and_run_json_says_which(tmp_path):
    config = load_config(config_file(tmp_path, b=False), env={})
    assert {v.name: v.tls_verify for v in config.vendors} == {"a": True, "b": False}
    a, b = (v.redacted() for v in config.vendors)
    assert "tls_verify" not in a and b["tls_verify"] is False  # run.json shows it where it is not the default


def test_the_vendor_setting_is_the_sessions_verify_and_wins_over_the_environments_bundle(tmp_path, monkeypatch):
    ca = a_ca_file(tmp_path / "conf" / "ca.pem")
    config = load_config(config_file(tmp_path / "conf", b="ca.pem"), env={})
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/from/the/environment.pem")
    unset = next(v for v in config.vendors if v.name == "a")
    with vendor_session(requests.Session, unset) as session:
        assert session.verify is True  # as the factory made it
        assert environment_settings(session, URL)["verify"] == "/from/the/environment.pem"  # as before
    for tls in (str(ca.resolve()), False):
        vendor = dataclasses.replace(next(v for v in config.vendors if v.name == "b"), tls_verify=tls)
        with vendor_session(requests.Session, vendor) as session:
            assert session.verify == tls
            assert environment_settings(session, URL)["verify"] == tls  # requests alone would take the variable


@pytest.mark.parametrize("cert, message", [
    ("missing.pem", "cannot load the certificate and its key (No such file or directory)"),
    ("not-a-cert.txt", "cannot load the certificate and its key ([SSL]"),
])
def test_the_simulator_refuses_a_certificate_it_cannot_load_naming_the_files(tmp_path, capsys, cert, message):
    from avv_sim.cli import main

    (tmp_path / "not-a-cert.txt").write_text("this is no certificate\n")
    cert_path, key_path = tmp_path / cert, tmp_path / "key.pem"
    assert main(["--profile", "p", "--tls-cert", str(cert_path), "--tls-key", str(key_path)]) == 2
    assert f"avv-sim: error: --tls-cert {cert_path} / --tls-key {key_path}: {message}" in capsys.readouterr().err
    assert main(["--profile", "p", "--tls-cert", str(cert_path)]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
