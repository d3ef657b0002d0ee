"""The wire client layer: one streaming attempt measured to the millisecond, retries and the record, the agent
loop, raw completions, stale connections."""
