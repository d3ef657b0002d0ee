"""The conformance suite as a whole (scoring layer, conformance): the probe file a conformance run sends
(:func:`write_probe_file`: every check's probes on the fixed requests and the run's samples) and the table of
results its records give (:func:`conformance_table`: one row per vendor and check, conformance.csv).

Pure but for writing the probe file. The checks themselves are declared in :mod:`.checks`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd

from avv_core.api_formats import COMPLETIONS, MESSAGES, RESPONSES, ConversionError, to_messages, to_responses
from avv_core.samples import Sample, SampleSet, load_samples
from avv_scoring.conformance.checks import CHECKS, FAIL, Answer, Judged
from avv_scoring.conformance.probes import Probe, fixed_requests, probes_of, sample_bases

#: conformance.csv's columns, in order.
CONFORMANCE_COLUMNS: tuple[str, ...] = ("model", "vendor", "check", "result", "evidence")
#: The probe file's name: ``probes-<first 12 hex digits of its sha256>.jsonl``.
PROBE_FILE = "probes-{digest}.jsonl"


def build_probes(samples: Iterable[Sample]) -> list[Probe]:
    """Every check's probes on the fixed requests and the run's first samples with tools, in the checks' order."""
    fixed = {b.name: b for b in fixed_requests()}
    bases = sample_bases(samples)
    out: list[Probe] = []
    seen: set[str] = set()
    for check in CHECKS:
        for made in check.probes(fixed, bases):
            if made.sample_id not in seen:
                seen.add(made.sample_id)
                out.append(made)
    return out


def probe_text(probes: Iterable[Probe]) -> str:
    """The probe file's text: one JSON line per probe."""
    return "".join(json.dumps(p.line(), ensure_ascii=False) + "\n" for p in probes)


def write_probe_file(samples: SampleSet, folder: str | os.PathLike[str]) -> SampleSet:
    """The probes of ``samples`` as a sample file in ``folder`` (``probes-<sha12>.jsonl``: the same inputs give the
    same file, kept when it is there), read back: the sample set of a conformance run."""
    text = probe_text(build_probes(samples.samples))
    path = Path(folder) / PROBE_FILE.format(digest=hashlib.sha256(text.encode("utf-8")).hexdigest()[:12])
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        partial = path.with_name(path.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    return load_samples(path)


#: Request keys raw mode (``endpoint: completions``) has no counterpart for: it renders the prompt itself.
RAW_MODE_KEYS = ("tool_choice", "parallel_tool_calls", "response_format")


def not_sent_reason(body: Mapping[str, object], endpoint: str) -> str | None:
    """Why a probe cannot be sent in the wire format ``endpoint`` (the conversion's error; raw mode: a parameter of
    the chat request it renders into its prompt), or None when it can."""
    if endpoint == COMPLETIONS:
        keys = [k for k in RAW_MODE_KEYS if body.get(k) is not None]
        return f"not sent (completions: raw mode renders the prompt locally, {keys[0]} is no parameter of it)" \
            if keys else None
    convert: Callable[..., object] | None = {MESSAGES: to_messages, RESPONSES: to_responses}.get(endpoint)
    if convert is None:
        return None
    try:
        convert(body)
    except ConversionError as exc:
        return f"not sent ({endpoint}: {exc})"
    return None


def conformance_table(records: pd.DataFrame, probes: Mapping[str, Probe], baselines: Mapping[str, str],
                      tolerance: Callable[[str], float]) -> pd.DataFrame:
    """One row per (model, vendor, check) of every vendor with a probe's record (:data:`CONFORMANCE_COLUMNS`), the
    vendors in their first-seen order, the checks in declaration order. ``records``: de-duplicated record rows;
    ``probes``: sample id → probe (:func:`~avv_scoring.conformance.probes.probes_of`); ``tolerance(model)``: the
    largest relative difference from the baseline's token counts."""
    if records.empty or not probes:
        return pd.DataFrame(columns=list(CONFORMANCE_COLUMNS))
    mine = records[records["sample_id"].astype(str).isin(set(probes))]
    answers: dict[tuple[str, str], dict[str, Answer]] = {}
    for row in mine.to_dict("records"):
        answer = Answer.of(row)
        answers.setdefault((str(row["model"]), str(row["vendor"])), {})[answer.sample_id] = answer
    by_check: dict[str, list[Probe]] = {}
    for p in probes.values():
        by_check.setdefault(p.check, []).append(p)
    rows: list[dict[str, str]] = []
    for (model, vendor), got in answers.items():
        baseline = baselines.get(model)
        reference = answers.get((model, baseline), {}) if baseline is not None else {}
        endpoint = next(iter(got.values())).endpoint
        not_sent = {sid: why for sid, p in probes.items() if sid not in got
                    and (why := not_sent_reason(p.body, endpoint)) is not None}
        for check in CHECKS:
            data = Judged(list(probes.values()) if check.suite_wide else by_check.get(check.name, []), got, reference,
                          vendor == baseline, not_sent, tolerance(model))
            outcome = check.judge(data)
            rows.append({"model": model, "vendor": vendor, "check": check.name, "result": outcome.result,
                         "evidence": outcome.evidence})
    return pd.DataFrame(rows, columns=list(CONFORMANCE_COLUMNS))


def failures_by_vendor(table: pd.DataFrame) -> dict[tuple[str, str], int]:
    """(model, vendor) → its failed checks, for every vendor of the table."""
    out: dict[tuple[str, str], int] = {}
    for row in table.to_dict("records"):
        key = (str(row["model"]), str(row["vendor"]))
        out[key] = out.get(key, 0) + (row["result"] == FAIL)
    return out


__all__ = ["CONFORMANCE_COLUMNS", "build_probes", "conformance_table", "failures_by_vendor", "not_sent_reason",
           "probes_of", "write_probe_file"]
