"""avv-sim: simulated tool-call vendors with known ground truth, speaking OpenAI chat completions, raw completions,
Anthropic Messages and OpenAI Responses (one plan per request, whatever the endpoint: endpoints.py).

Public API::

    load_profiles(path_or_mapping) -> dict[str, Profile]
    Profile                              # the knob dataclass
    start_simulator(config_path=None, *, profiles=None, truth_log=None, port=0, timeout=10.0,
                    gold=None) -> SimProcess   # gold: a sample file whose labels (and agent tasks) the
                                               # reference follows
    request_hash(body) -> str            # sha256 of the body without model / stream / stream_options
    gold_key(body) -> str                # sha256 of the body's messages and tools (how gold is found)
    KNOBS, QUIRKS                        # the knob declarations, the quirk names (profiles.py, quirks.py)
    TruthRecord                          # one line of the truth log (truth.py)
    read_truth_log(path) -> list[dict]   # a truth log's lines; truth_by_tag(path) -> {client_tag: line}

Importing this package does not import aiohttp or start an event loop (safe under gevent).
"""

from avv_sim.gold import gold_key
from avv_sim.launcher import SimProcess, SimulatorError, start_simulator
from avv_sim.profiles import KNOBS, Profile, ProfileError, load_profiles
from avv_sim.quirks import QUIRKS
from avv_sim.request import request_hash
from avv_sim.truth import TruthRecord, read_truth_log, truth_by_tag

__all__ = [
    "KNOBS",
    "QUIRKS",
    "Profile",
    "ProfileError",
    "SimProcess",
    "SimulatorError",
    "TruthRecord",
    "gold_key",
    "load_profiles",
    "read_truth_log",
    "request_hash",
    "start_simulator",
    "truth_by_tag",
]
