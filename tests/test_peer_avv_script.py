"""bench/peer_avv.py without the peer (issue 28): when agent-vendor-verifier cannot be installed the script says so
and exits with its own status; an existing venv is used as it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import peer_avv  # noqa: E402


def test_a_peer_that_cannot_be_installed_is_a_clear_exit(tmp_path, monkeypatch, capsys):
    def refuse(cmd, **kwargs):
        if "pip" in str(cmd[0]):
            raise subprocess.CalledProcessError(1, cmd, stderr="ERROR: No matching distribution found for "
                                                "agent-vendor-verifier==0.1.0")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(peer_avv.subprocess, "run", refuse)
    with pytest.raises(SystemExit) as stop:
        peer_avv.ensure_peer(tmp_path / "venv")
    assert stop.value.code == peer_avv.EXIT_NO_PEER
    said = capsys.readouterr().err
    assert "cannot install agent-vendor-verifier==0.1.0" in said and "No matching distribution" in said


def test_an_installed_peer_is_used_as_it_is(tmp_path, monkeypatch):
    command = tmp_path / "venv" / "bin" / "agent-vendor-verifier"
    command.parent.mkdir(parents=True)
    command.write_text("#!/bin/sh\n")
    monkeypatch.setattr(peer_avv.subprocess, "run", lambda *a, **k: pytest.fail("no install expected"))
    assert peer_avv.ensure_peer(tmp_path / "venv") == command
