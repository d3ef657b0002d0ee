"""The request headers the client owns (shared, pure): those that frame a request on the wire and the harness's
item tags. A vendor config or ``--avv-header`` naming one is refused where it is read (avv_harness.inputs,
avv_harness.dialects.overrides), and the wire client refuses a request carrying a framing header
(avv_harness.wire.headers holds the rule for every other header).
"""

from __future__ import annotations

from avv_core.items import ATTEMPT_HEADER, ITEM_HEADER

#: Headers that frame the request on the wire: the client writes them from the body and connection it sends.
FRAMING = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
                     "expect", "proxy-connection"})
#: The harness's own headers (the item tag the simulator's truth log and resume rely on).
RESERVED = frozenset({ITEM_HEADER.lower(), ATTEMPT_HEADER.lower()})


def refused_header(name: str) -> str | None:
    """Why a configured header cannot be sent (None: it can)."""
    lowered = name.lower()
    if lowered in FRAMING:
        return "is written by the client itself (it frames the request on the wire)"
    if lowered in RESERVED:
        return "is the harness's own item tag"
    return None
