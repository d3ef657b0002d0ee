"""avv-sim: simulated OpenAI-compatible tool-call vendors with known ground truth.

Public API::

    load_profiles(path_or_mapping) -> dict[str, Profile]
    Profile                              # the knob dataclass
    start_simulator(config_path=None, *, profiles=None, truth_log=None, port=0, timeout=10.0) -> SimProcess
    request_hash(body) -> str            # sha256 of the body without model / stream / stream_options

Importing this package does not import aiohttp or start an event loop (safe under gevent).
"""

from .behaviour import request_hash
from .launcher import SimProcess, SimulatorError, start_simulator
from .profiles import KNOBS, QUIRKS, Profile, ProfileError, load_profiles

__all__ = [
    "KNOBS",
    "QUIRKS",
    "Profile",
    "ProfileError",
    "SimProcess",
    "SimulatorError",
    "load_profiles",
    "request_hash",
    "start_simulator",
]
