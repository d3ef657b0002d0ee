"""The README tables the code defines — options, record columns, error kinds, anomalies, the text tool-call
formats, the reasoning fields, the wire formats (which there are, the request conversion field by field, the stop
reasons), the Prometheus metrics, (from avv_scoring) the metric registry and (from avv_sim) the simulator's knobs — and
docs/simulator.md's tables (knobs, quirks, truth-log fields) and docs/how-to/conformance.md's table of checks, rendered
from the one place each is declared.

    python -m avv_harness.docs README.md        # rewrite the marked blocks in place
    python -m avv_harness.docs --check README.md
    python -m avv_harness.docs docs/simulator.md
    python -m avv_harness.docs docs/how-to/conformance.md

``tests/test_docs.py`` fails when a block in either file differs from what this renders.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

from avv_core import api_formats, api_outcomes
from avv_core.reasoning import render_reasoning_table
from avv_core.records import ANOMALIES, COLUMNS, ERROR_KINDS, IMPORTED_ERROR_KINDS
from avv_core.tool_formats import render_format_table
from avv_harness.run.options import DATA_DIR, add_arguments
from avv_harness.wire.execute import RETRYABLE
from avv_harness.wire.formats import FORMATS


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_options_table() -> str:
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for action in parser._actions:
        name = action.option_strings[0]
        if action.const is True and action.default is False:
            default = "off"
        elif action.default is None:
            default = ""
        else:
            default = str(action.default).replace(str(DATA_DIR), "avv_harness/data")
        rows.append(f"| `{name}` | {_cell(default)} | {_cell(action.help or '')} |")
    return "\n".join(rows)


def render_columns_table() -> str:
    rows = ["| column | type | meaning |", "|---|---|---|"]
    rows += [f"| `{c.name}` | {c.kind}{_range(c.low, c.high)} | {_cell(c.doc)} |" for c in COLUMNS]
    return "\n".join(rows)


def _range(low: float | None, high: float | None) -> str:
    """A number column's bounds as the table shows them: ` ≥ 0`, ` 0–1e+08`."""
    if low is None and high is None:
        return ""
    if high is None:
        return f" ≥ {low:g}"
    return f" {low:g}–{high:g}" if low is not None else f" ≤ {high:g}"


def render_error_kinds_table() -> str:
    rows = ["| error_kind | meaning | retried |", "|---|---|---|"]
    kinds = {**ERROR_KINDS, **IMPORTED_ERROR_KINDS}
    rows += [f"| `{k}` | {_cell(v)} | {'yes' if k in RETRYABLE else 'no'} |" for k, v in kinds.items()]
    return "\n".join(rows)


def render_anomalies_table() -> str:
    rows = ["| anomaly | meaning |", "|---|---|"]
    rows += [f"| `{k}` | {_cell(v)} |" for k, v in ANOMALIES.items()]
    return "\n".join(rows)


def render_wire_formats_table() -> str:
    """The wire formats (:mod:`avv_harness.wire.formats`): endpoint, request, headers."""
    rows = ["| `endpoint` | what is sent | headers |", "|---|---|---|"]
    for wire in FORMATS.values():
        sent = {**wire.default_headers(), **wire.auth_headers("KEY")}
        headers = ", ".join(f"`{name}: {value}`" for name, value in sent.items())
        rows.append(f"| `{wire.name}` | {_cell(wire.summary)} | {headers} |")
    return "\n".join(rows)


def render_conversion_table() -> str:
    """The request conversion, field by field (:data:`avv_core.api_formats.FIELDS`)."""
    rows = ["| chat completions (the samples) | `endpoint: messages` | `endpoint: responses` |", "|---|---|---|"]
    rows += [f"| {_cell(f.chat)} | {_cell(f.messages)} | {_cell(f.responses)} |" for f in api_formats.FIELDS]
    return "\n".join(rows)


def render_stop_reasons_table() -> str:
    """How each format's stop reason becomes the record's ``finish_reason`` (:mod:`avv_core.api_formats`)."""
    rows = ["| `endpoint` | the vendor's word (`stop_reason`) | `finish_reason` |", "|---|---|---|"]
    words = [*api_outcomes.MESSAGES_FINISH, "refusal", "pause_turn"]
    rows += [f"| `messages` | `{w}` | `{api_outcomes.finish_from_messages(w)}` |" for w in words]
    for status, reason, calls in (("completed", None, False), ("completed", None, True),
                                  ("incomplete", "max_output_tokens", False), ("incomplete", "content_filter", False),
                                  ("failed", None, False)):
        word = f"`{status}:{reason}`" if reason else f"`{status}`" + (" with calls" if calls else "")
        finish = api_outcomes.finish_from_responses(status, reason, calls)
        shown = f"`{finish}`" if finish else "— (`response.failed`: `stream_error`, or `overloaded`)"
        rows.append(f"| `responses` | {word} | {shown} |")
    rows.append("| `chat`, `completions` | the raw `finish_reason` | the same (raw mode: `stop` with parsed calls → "
                "`tool_calls`) |")
    return "\n".join(rows)


def _metrics() -> str:
    from avv_scoring.metrics.registry import render_metric_table

    return render_metric_table()


def _prom_metrics() -> str:
    from avv_harness.locust.prometheus import render_prom_table

    return render_prom_table()


def _sim_knobs() -> str:
    from avv_sim.profiles import render_knob_table

    return render_knob_table()


def _sim_quirks() -> str:
    from avv_sim.quirks import render_quirk_table

    return render_quirk_table()


def _sim_truth() -> str:
    from avv_sim.truth import render_truth_table

    return render_truth_table()


BLOCKS: dict[str, Callable[[], str]] = {
    "options": render_options_table,
    "columns": render_columns_table,
    "error-kinds": render_error_kinds_table,
    "anomalies": render_anomalies_table,
    "tool-formats": render_format_table,
    "reasoning-fields": render_reasoning_table,
    "wire-formats": render_wire_formats_table,
    "conversion": render_conversion_table,
    "stop-reasons": render_stop_reasons_table,
    "metrics": _metrics,
    "prom-metrics": _prom_metrics,
    "sim-knobs": _sim_knobs,
}
#: docs/simulator.md's blocks: the simulator's declarations.
SIMULATOR_BLOCKS: dict[str, Callable[[], str]] = {
    "sim-knobs": _sim_knobs,
    "sim-quirks": _sim_quirks,
    "sim-truth": _sim_truth,
}


def _conformance_checks() -> str:
    from avv_scoring.conformance.checks import render_check_table

    return render_check_table()


#: docs/how-to/conformance.md's block: the conformance checks (avv_scoring.conformance.checks).
CONFORMANCE_BLOCKS: dict[str, Callable[[], str]] = {"conformance-checks": _conformance_checks}


def blocks_for(path: str) -> dict[str, Callable[[], str]]:
    """The blocks a documentation file holds: docs/simulator.md's, docs/how-to/conformance.md's, else the
    README's."""
    path = path.replace("\\", "/")
    if path.endswith("docs/simulator.md"):
        return SIMULATOR_BLOCKS
    return CONFORMANCE_BLOCKS if path.endswith("docs/how-to/conformance.md") else BLOCKS


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- {name}:start -->\n)(.*?)(\n<!-- {name}:end -->)", re.S)


def _replacement(rendered: str) -> Callable[[re.Match[str]], str]:
    """A block's new text between its markers."""
    return lambda match: match.group(1) + rendered + match.group(3)


def render_into(text: str, blocks: dict[str, Callable[[], str]] | None = None) -> str:
    for name, render in (BLOCKS if blocks is None else blocks).items():
        text, count = _pattern(name).subn(_replacement(render()), text)
        if count != 1:
            raise SystemExit(f"expected one <!-- {name}:start --> … <!-- {name}:end --> block, found {count}")
    return text


def block(text: str, name: str) -> str | None:
    match = _pattern(name).search(text)
    return match.group(2) if match else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m avv_harness.docs")
    parser.add_argument("readme")
    parser.add_argument("--check", action="store_true", help="exit 1 when a block is out of date")
    args = parser.parse_args(argv)
    with open(args.readme, encoding="utf-8") as fh:
        text = fh.read()
    new = render_into(text, blocks_for(args.readme))
    if args.check:
        return 0 if new == text else 1
    with open(args.readme, "w", encoding="utf-8") as fh:
        fh.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
