"""The wire client layer: one streaming attempt measured to the millisecond, retries and the record, the agent
loop, the wire formats (chat completions, raw completions, Anthropic Messages, OpenAI Responses: one module each
in :mod:`avv_harness.wire.formats`), stale connections."""
