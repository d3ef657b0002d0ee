"""avv-sim: simulated OpenAI-compatible tool-call vendors with known ground truth.

Public API::

    load_profiles(path_or_mapping) -> dict[str, Profile]
    Profile                              # the knob dataclass
    start_simulator(config_path=None, *, profiles=None, truth_log=None, port=0, timeout=10.0,
                    gold=None) -> SimProcess   # gold: a sample file whose labels (and agent tasks) the
                                               # reference follows
    request_hash(body) -> str            # sha256 of the body without model / stream / stream_options
    gold_key(body) -> str                # sha256 of the body's messages and tools (how gold is found)

Importing this package does not import aiohttp or start an event loop (safe under gevent).
"""

from avv_sim.behaviour import request_hash
from avv_sim.gold import gold_key
from avv_sim.launcher import SimProcess, SimulatorError, start_simulator
from avv_sim.profiles import KNOBS, QUIRKS, Profile, ProfileError, load_profiles

__all__ = [
    "KNOBS",
    "QUIRKS",
    "Profile",
    "ProfileError",
    "SimProcess",
    "SimulatorError",
    "gold_key",
    "load_profiles",
    "request_hash",
    "start_simulator",
]
