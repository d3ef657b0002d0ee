"""avv_core: what the harness, the scoring and the simulator share — the record schema and records.csv,
ItemKey, run.json, samples and agent tasks, canonical JSON, tool-call text formats, language checks, small
measures, strict JSON / YAML input, bounded schema validation, errors. It imports nothing else of ours."""
