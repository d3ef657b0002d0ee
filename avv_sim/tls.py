"""The simulator's HTTPS (``avv-sim --tls-cert/--tls-key``, issue 39): the server context, and a self-signed
certificate made at run time for the benchmarks and tests that run a client over TLS against it.

The certificate is made with the ``openssl`` command (no Python dependency for a test and bench feature); the
client trusts it as its own CA (``REQUESTS_CA_BUNDLE``, or a session's ``verify`` = the certificate's path).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path


def server_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """A server context for a certificate chain and its key (an unreadable or bad file raises ``OSError`` /
    ``ssl.SSLError``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def can_make_certificate() -> bool:
    return shutil.which("openssl") is not None


def make_certificate(folder: str | Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` (an IP address: its subjectAltName) and its key, in ``folder``:
    (cert.pem, key.pem). ECDSA P-256, valid two days. Raises ``FileNotFoundError`` without ``openssl``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "2", "-subj", f"/CN={host}", "-addext", f"subjectAltName=IP:{host}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key
