# Locust monkey-patches the standard library with gevent when it is imported; that must happen before
# requests / urllib3 / ssl are imported by any test module, or ssl recurses. Import it first.
import locust  # noqa: F401, I001

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))


@pytest.fixture
def tmp_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (the shared datasets are only on the team's machines)")
    return path


os.environ.setdefault("PYTHONUNBUFFERED", "1")
