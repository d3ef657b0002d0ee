"""Writing one stream's token events at absolute deadlines from event-loop callbacks (simulator layer, I/O:
it writes to the connection's transport).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from avv_sim.truth import Exchange

# epoll rounds its timeout UP to whole milliseconds, so a timer fires 0-1 ms late; aiming this much early
# centres the error on the deadline instead of always being late.
TIMER_LEAD_S = 0.00075


class Pacer:
    """Writes one stream's token events from event-loop callbacks at absolute deadlines.

    Callbacks (``loop.call_at``) + direct ``transport.write`` cost far less per event than a coroutine
    that sleeps and awaits ``StreamResponse.write``, which matters with hundreds of concurrent streams.
    Events already due when a callback runs (the loop fell behind) go out in one write.
    The caller has sent the headers (aiohttp buffers them until the first body write) and enabled chunked
    encoding, so each event is framed as one HTTP chunk here.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.BaseTransport | None,
        deadlines: list[float],
        make_event: Callable[[int], bytes],
        exchange: Exchange,
    ):
        self.loop = loop
        self.transport = transport
        self.deadlines = deadlines
        self.make_event = make_event
        self.exchange = exchange
        self.next = 0
        self.future: asyncio.Future | None = None
        self.handle: asyncio.TimerHandle | None = None

    def start(self) -> asyncio.Future:
        self.future = self.loop.create_future()
        self.handle = self.loop.call_at(self.deadlines[0] - TIMER_LEAD_S, self._step)
        return self.future

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def _step(self) -> None:
        self.handle = None
        fut = self.future
        if fut is None or fut.done():
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            fut.set_exception(ConnectionResetError("client went away"))
            return
        now = self.loop.time()
        j = self.next
        n = len(self.deadlines)
        parts = []
        while True:
            data = self.make_event(j)
            parts.append(b"%x\r\n%s\r\n" % (len(data), data))
            j += 1
            if j >= n or self.deadlines[j] - TIMER_LEAD_S > now:
                break
        cast(asyncio.WriteTransport, transport).write(b"".join(parts) if len(parts) > 1 else parts[0])
        if self.next == 0:
            self.exchange.t_first_token = self.loop.time()
        self.next = j
        self.exchange.chunks_sent = j  # token counts are derived once, when the record is written
        if j < n:
            self.handle = self.loop.call_at(self.deadlines[j] - TIMER_LEAD_S, self._step)
        else:
            fut.set_result(None)
