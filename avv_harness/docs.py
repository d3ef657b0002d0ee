"""The documentation's generated tables — every ``--avv-*`` option, the config keys, the record columns, error
kinds and anomalies, the metric registry, the threshold and adapter presets, the wire formats (which there are, the
request conversion field by field, the stop reasons, the reasoning fields, the text tool-call formats), the exit
statuses, the Prometheus metrics, the simulator's knobs, quirks and truth-log fields, and the module map with its
layer rules — rendered from the one place each is declared, into marked blocks of the pages under ``docs/``.

    python -m avv_harness.docs                  # rewrite every page's blocks in place
    python -m avv_harness.docs --check          # exit 1 (naming the pages) when a block is out of date
    python -m avv_harness.docs docs/reference/options.md   # one page
    python -m avv_harness.docs docs/reference/wire-faults.md   # a page generated whole

A block is ``<!-- name:start -->`` … ``<!-- name:end -->``; :data:`PAGES` says which blocks each page holds.
``tests/test_docs.py`` fails when a block differs from what this renders.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from avv_core import api_formats, api_outcomes
from avv_core.reasoning import render_reasoning_table
from avv_core.records import ANOMALIES, COLUMNS, ERROR_KINDS, IMPORTED_ERROR_KINDS
from avv_core.tool_formats import render_format_table
from avv_harness.run.options import DATA_DIR, add_arguments
from avv_harness.wire.faults import RETRYABLE, render_wire_faults_page
from avv_harness.wire.formats import FORMATS
from avv_harness.wire.formats.base import render_stream_ends
from avv_scoring.conformance.checks import render_check_table

ROOT = Path(__file__).resolve().parent.parent  # the checkout: docs/ and bench/ are beside the packages


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_options_table() -> str:
    """Every ``--avv-*`` option, from the function Locust's parser hook calls (``init_command_line_parser`` in
    :mod:`avv_harness.locust.plugin`; importing Locust here would come after ``requests``, too late for gevent)."""
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


def render_stream_ends_table() -> str:
    """How each Messages / Responses stream can end, and what the record says (the formats' ``ends``)."""
    return render_stream_ends(FORMATS, RETRYABLE)


def _metrics() -> str:
    from avv_scoring.metrics.registry import render_metric_table

    return render_metric_table()


def _statistics() -> str:
    from avv_scoring.metrics.registry import render_statistics_table

    return render_statistics_table()


def _interval_metrics() -> str:
    """The docs' sentence naming the metrics with an interval (a list item of docs/scoring.md's "Is the difference
    real?")."""
    from avv_scoring.metrics.registry import interval_sentence

    return (f"- **95 % intervals** for {interval_sentence()} (`<metric>_ci_low`, `<metric>_ci_high`): the metrics "
            "declared with `interval=True` ([Statistics per metric](reference/metrics.md#statistics-per-metric));")


def _interval_metrics_how_to() -> str:
    from avv_scoring.metrics.registry import interval_sentence

    return f"The metrics with an interval: {interval_sentence()}."


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


def _exit_statuses() -> str:
    from avv_core.exit_status import render_exit_table

    return render_exit_table().rstrip("\n")


def _config_fields() -> str:
    from avv_harness.inputs.config_fields import render_config_table

    return render_config_table()


def render_threshold_presets_table() -> str:
    """Each ``--thresholds`` preset's bounds (:mod:`avv_scoring.presets`)."""
    from avv_scoring.presets import PRESETS, preset
    from avv_scoring.verdict import bounds_text

    rows = ["| preset | bounds (a vendor FAILs when one is broken) |", "|---|---|"]
    for name in PRESETS:
        thresholds = preset(name)
        bounds = []
        for column in thresholds:
            text = f"`{bounds_text(column, thresholds[column])}`"
            sample_set = thresholds.sample_set_of(column)
            bounds.append(text + (f" (judged on `{sample_set}` samples only)" if sample_set else ""))
        rows.append(f"| `{name}` | {_cell('; '.join(bounds) or 'none: every vendor passes')} |")
    return "\n".join(rows)


def render_adapters_table() -> str:
    """The adapter presets and the transforms they run (:mod:`avv_harness.dialects.transforms`)."""
    from avv_harness.dialects.transforms import ADAPTERS, AUTO, AUTO_RULES

    rows = ["| adapter | transforms, in order |", "|---|---|"]
    rows += [f"| `{name}`{' (default)' if name == 'generic' else ''} | "
             f"{', '.join(f'`{t}`' for t in transforms) or '— (the sample as written)'} |"
             for name, transforms in ADAPTERS.items()]
    picks = "; ".join(f"`{adapter}` when the vendor's `model_id` matches `/{pattern.pattern}/` (any case)"
                      for pattern, adapter in AUTO_RULES)
    rows.append(f"| `{AUTO}` | {_cell(picks)}; else `generic` (run.json says which and why) |")
    return "\n".join(rows)


def render_transforms_table() -> str:
    """Every request transform with the first paragraph of its docstring."""
    from avv_harness.dialects.transforms import TRANSFORMS

    rows = ["| transform | what it does |", "|---|---|"]
    rows += [f"| `{name}` | {_cell(_plain(_first_paragraph(func.__doc__)))} |" for name, func in TRANSFORMS.items()]
    return "\n".join(rows)


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _plain(text: str) -> str:
    """Sphinx roles and double backticks as Markdown code: ``:mod:`x.y``` → `x.y`."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _first_sentence(doc: str | None, limit: int = 220) -> str:
    text = _plain(_first_paragraph(doc))
    match = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", text)
    sentence = text[:match.start() + 1] if match else text
    return sentence if len(sentence) <= limit else sentence[:limit].rsplit(" ", 1)[0] + " …"


def _import_graph() -> Any:
    """bench/import_graph.py, the layering's one declaration (a script, not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "bench" / "import_graph.py")
    if spec is None or spec.loader is None:
        raise SystemExit("bench/import_graph.py not found: run this from a checkout")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render_layer_rules_table() -> str:
    """Which package may import which (``ALLOWED`` in bench/import_graph.py)."""
    graph = _import_graph()
    rows = ["| package | may import | its job |", "|---|---|---|"]
    for package in graph.PACKAGES:
        allowed = ", ".join(f"`{p}`" for p in sorted(graph.ALLOWED[package]) if p != package) or "nothing of ours"
        doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8")))
        rows.append(f"| `{package}` | {allowed} | {_cell(_first_sentence(doc))} |")
    return "\n".join(rows)


def render_folder_order() -> str:
    """Each package's folders and top-level modules, lowest first (``LAYERS`` in its ``__init__.py``)."""
    graph = _import_graph()
    rows = ["| package | folders and top-level modules, lowest first |", "|---|---|"]
    for package in graph.PACKAGES:
        order = graph.layers(package)
        if order:
            rows.append(f"| `{package}` | {' → '.join(f'`{name}`' for name in order)} |")
    return "\n".join(rows)


def render_module_map() -> str:
    """Every module of the four packages, folder by folder, with the first sentence of its docstring."""
    graph = _import_graph()
    out: list[str] = []
    for package in graph.PACKAGES:
        folders = sorted({path.parent for path in (ROOT / package).rglob("*.py")},
                         key=lambda folder: folder.relative_to(ROOT).parts)
        for folder in folders:
            rel = folder.relative_to(ROOT).as_posix()
            init = folder / "__init__.py"
            intro = _first_sentence(ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), 400) \
                if init.exists() else ""
            out += [f"**`{rel}/`**" + (f" — {intro}" if intro else ""), "", "| module | job |", "|---|---|"]
            for path in sorted(folder.glob("*.py")):
                if path.name == "__init__.py":
                    continue
                doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
                out.append(f"| `{path.name}` | {_cell(_first_sentence(doc))} |")
            out.append("")
    return "\n".join(out).rstrip("\n")


#: The simulator's blocks (docs/simulator.md).
SIMULATOR_BLOCKS: dict[str, Callable[[], str]] = {
    "sim-knobs": _sim_knobs,
    "sim-quirks": _sim_quirks,
    "sim-truth": _sim_truth,
}

#: Every page that holds generated blocks, with its blocks (paths relative to the checkout).
PAGES: dict[str, dict[str, Callable[[], str]]] = {
    "docs/reference/options.md": {"options": render_options_table},
    "docs/reference/config.md": {"config-fields": _config_fields},
    "docs/reference/records.md": {"columns": render_columns_table, "error-kinds": render_error_kinds_table,
                                  "anomalies": render_anomalies_table},
    "docs/reference/metrics.md": {"metrics": _metrics, "statistics": _statistics},
    "docs/scoring.md": {"interval-metrics": _interval_metrics},
    "docs/how-to/avv-score.md": {"interval-metrics": _interval_metrics_how_to},
    "docs/reference/presets.md": {"threshold-presets": render_threshold_presets_table,
                                  "adapters": render_adapters_table, "transforms": render_transforms_table},
    "docs/reference/wire-formats.md": {"wire-formats": render_wire_formats_table,
                                       "conversion": render_conversion_table, "stop-reasons": render_stop_reasons_table,
                                       "reasoning-fields": render_reasoning_table, "tool-formats": render_format_table},
    "docs/reference/exit-status.md": {"exit-statuses": _exit_statuses},
    "docs/reference/prometheus.md": {"prom-metrics": _prom_metrics},
    "docs/simulator.md": SIMULATOR_BLOCKS,
    "docs/explanation/architecture.md": {"layer-rules": render_layer_rules_table, "folder-order": render_folder_order,
                                         "module-map": render_module_map},
    "docs/reference/stream-ends.md": {"stream-ends": render_stream_ends_table},
    "docs/how-to/conformance.md": {"conformance-checks": render_check_table},
}


#: Pages generated whole (the path's tail → its renderer).
GENERATED_PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/wire-faults.md": render_wire_faults_page,
}


def generated_page(path: str) -> Callable[[], str] | None:
    normal = path.replace("\\", "/")
    return next((render for tail, render in GENERATED_PAGES.items() if normal.endswith(tail)), None)


def blocks_for(path: str) -> dict[str, Callable[[], str]]:
    """The blocks a documentation file holds (by its path relative to the checkout, or any path ending so)."""
    shown = Path(path).resolve().as_posix()
    for page, blocks in PAGES.items():
        if shown.endswith("/" + page):
            return blocks
    raise SystemExit(f"{path}: not a page with generated blocks ({', '.join(PAGES)})")


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- {name}:start -->\n)(.*?)(\n<!-- {name}:end -->)", re.S)


def _replacement(rendered: str) -> Callable[[re.Match[str]], str]:
    """A block's new text between its markers."""
    return lambda match: match.group(1) + rendered + match.group(3)


def render_into(text: str, blocks: dict[str, Callable[[], str]]) -> str:
    for name, render in blocks.items():
        text, count = _pattern(name).subn(_replacement(render()), text)
        if count != 1:
            raise SystemExit(f"expected one <!-- {name}:start --> … <!-- {name}:end --> block, found {count}")
    return text


def block(text: str, name: str) -> str | None:
    match = _pattern(name).search(text)
    return match.group(2) if match else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m avv_harness.docs",
                                     description="Regenerate the documentation's generated tables.")
    parser.add_argument("pages", nargs="*", help="pages to rewrite (default: every page of PAGES)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a block is out of date")
    args = parser.parse_args(argv)
    paths = args.pages or [str(ROOT / page) for page in (*PAGES, *GENERATED_PAGES)]
    stale = []
    for path in paths:
        whole = generated_page(path)
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            if whole is None:
                raise
            text = ""
        new = whole() if whole is not None else render_into(text, blocks_for(path))
        if new == text:
            continue
        stale.append(path)
        if not args.check:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(new)
    if args.check and stale:
        print("out of date (python -m avv_harness.docs rewrites them): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
