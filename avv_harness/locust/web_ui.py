"""The Vendors tab in Locust's web UI, the downloads, and a start form that says what sets the users (harness
layer: with the controller and locust_plugin, the only code that touches Locust).

Built on Locust's documented extension points (locust ``examples/extend_web_ui.py``,
``docs/extending-locust.rst``):

- the template args ``extended_tabs`` / ``extended_tables`` (a "Vendors" tab; in stress mode also "Stress
  levels") and ``extended_csv_files`` (links on Locust's "Download Data" tab), set once: Locust's
  ``update_template_args`` merges into them;
- an ``after_request`` hook on ``web_ui.app`` that adds ``extended_stats`` rows to the ``/stats/requests`` JSON
  the UI polls every 2 s (rows from :meth:`avv_harness.locust.live_board.LiveBoard.snapshot`, formatted like the
  report);
- a Flask Blueprint under ``/avv``: ``live.json`` (the snapshot with raw numbers), ``metrics`` (the same numbers
  in Prometheus' text format, :mod:`avv_harness.locust.prometheus`) and ``download/<file>``
  (records.csv, scores.csv, report.html, report.md of the current run, or of ``?run=<run id>``; scores.csv
  of a run still going is the scores so far, written by the report's CSV writer). Its messages (no such run,
  not written yet) are ``text/plain`` with what they echo HTML-escaped as well: a ``?run=<img onerror=…>``
  never becomes markup in a browser.

With ``--web-login`` and ``AVV_WEB_PASSWORD``, :mod:`avv_harness.locust.web_login` is the login handler Locust
asks for. Every route, Locust's and ours, is behind :mod:`avv_harness.locust.web_guard`: no CORS headers for an origin
that is not allow-listed (``--avv-cors-origin``; Locust itself calls ``CORS(app)``), and a foreign page's POST
or subresource request refused.

The start form: the run's shape sets the users, so the form's users / ramp-up / run-time fields are disabled
(Locust's own ``hide_common_options``, with its tooltip), the host warnings are off (each User class has its
vendor's URL as ``host``; the Host field is not used), and a one-line note at the top of the page says so.
"""

from __future__ import annotations

import html
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from flask import Blueprint, Response, abort, jsonify, make_response, request, send_file

from avv_core.json_types import JSONObject
from avv_core.measures import is_missing
from avv_harness.locust.live_board import MAX_ROWS, LiveBoard, live_board

if TYPE_CHECKING:
    from locust.env import Environment

    from avv_harness.run.controller import RunController
    from avv_scoring.report.format import CellFormat

log = logging.getLogger("avv")

VENDORS_KEY, LEVELS_KEY = "avv-vendors", "avv-levels"
DOWNLOADS = {"records.csv": "text/csv", "scores.csv": "text/csv", "report.html": "text/html",
             "report.md": "text/markdown"}


def __getattr__(name: str) -> object:
    if name == "AGENT_COLUMNS":  # read lazily: the registry loads every metric module
        from avv_scoring.metrics.registry import web_metrics

        return tuple(m.column for m in web_metrics(agent=True) if m.needs == "agent")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Agent-trajectory metrics the Vendors tab adds when the run's samples have agent tasks (the registry's metrics
#: with a ``web`` position that need agent tasks; lazy).
AGENT_COLUMNS: tuple[str, ...]


def vendor_columns(stress: bool, several_models: bool, agent: bool = False) -> list[tuple[str, str, CellFormat]]:
    """The Vendors tab's columns (key, title, format): counts, then the registry's metrics of the tab
    (:func:`~avv_scoring.metrics.registry.web_metrics`: the headline ``table=True`` metrics, then those declared
    with a ``web`` position — tool_match, TTFT p50/p95 —, with ``agent`` (the samples have agent tasks) the
    trajectory metrics too) with the report's headers and formats, then anomalies, IRF and verdict so far. The
    trajectory metrics are not ``table=True``: every other run would show a column of n/a."""
    from avv_scoring.metrics.registry import web_metrics

    columns: list[tuple[str, str, CellFormat]] = [("name", "Vendor", "text")]
    if several_models:
        columns.append(("model", "Model", "text"))
    columns.append(("items", "Requests" if stress else "Items done / total", "text"))
    if stress:
        columns.append(("level", "Level", "text"))
    columns.append(("failed", "Items failed", "int"))
    shown: list[tuple[str, str, CellFormat]] = [(m.column, m.header, m.fmt) for m in web_metrics(agent)]
    return columns + shown + [("anomalies", "Anomalies", "int"), ("irf", "IRF so far", "irf"),
                              ("verdict", "Verdict so far", "text")]


def vendor_rows(snapshot: JSONObject, columns: list[tuple[str, str, CellFormat]]) -> list[dict[str, str]]:
    """The Vendors tab's rows, formatted like the report (:func:`avv_scoring.report.format.fmt`; ``n/a`` = missing)."""
    from avv_scoring.report.format import fmt, vendor_label

    rows = []
    for v in snapshot["vendors"][:MAX_ROWS]:
        scores = v["scores"]
        label = vendor_label(v)
        total = v["items_total"]
        level = snapshot.get("level")
        verdict = scores.get("verdict")
        down = v.get("vendor_down")
        stopped = (f" · stopped: vendor_down ({down.get('what')}; {down.get('skipped')} items skipped)"
                   if down else "")
        cells = {
            "name": label, "model": v["model"],
            "items": (f"{v['items_done']} / {total}" if total is not None else str(v["items_done"])) + stopped,
            "level": (f"stopped after {v['stopped_after_level']}" if v.get("stopped_after_level") is not None
                      else "" if level is None else str(level)),
            "failed": fmt(v["failed"], "int"), "anomalies": fmt(v["anomalies"], "int"),
            "verdict": verdict_cell(verdict, scores.get("verdict_reasons")),
        }
        for key, _, kind in columns:
            if key not in cells:
                cells[key] = fmt(scores.get(key), kind)
        rows.append(cells)
    return rows


def verdict_cell(verdict: object, reasons: object) -> str:
    """The Vendors tab's verdict: ``PASS``, ``FAIL: why`` or ``INCONCLUSIVE: why (about N more samples …)`` — the
    scores' ``verdict`` and ``verdict_reasons``, as report.md says them; ``n/a`` before the first scoring."""
    if not verdict or is_missing(verdict):
        return "n/a"
    why = "" if reasons is None or is_missing(reasons) else str(reasons)
    return f"{verdict}: {why}" if why else str(verdict)


def level_structure() -> list[dict[str, str]]:
    """The Stress levels tab's columns: the report's per-level table (the stress section's
    :data:`~avv_scoring.report.sections.stress.LEVEL_TABLE`)."""
    from avv_scoring.report.sections.stress import LEVEL_TABLE

    return [{"key": c.column, "title": c.header} for c in LEVEL_TABLE]


def level_rows(snapshot: JSONObject) -> list[dict[str, str]]:
    """The Stress levels tab's rows: the report's per-level table (the stress section's
    :data:`~avv_scoring.report.sections.stress.LEVEL_TABLE`)."""
    from avv_scoring.report.sections.stress import LEVEL_TABLE

    return [{**{c.column: c.cell(row) for c in LEVEL_TABLE}, "name": f"{row.get('vendor')}@{row.get('level')}"}
            for row in snapshot["levels"][:MAX_ROWS]]


def shape_note(ctl: RunController) -> str:
    """The note at the top of the page: what sets the users and what START / STOP do."""
    o = ctl.options
    if o.is_stress:
        s = o.stress
        assert s is not None  # stress mode has its settings (RunOptions)
        users = (f"steps every vendor through the ladder {', '.join(map(str, s.levels))} users, {s.step_s:g} s per "
                 "level, until each has broken the SLO twice or the ladder ends")
    else:
        per_vendor = " · ".join(f"{v.name} {v.concurrency}" for v in ctl.vendors.values())
        users = (f"runs each vendor's configured concurrency ({per_vendor}) until every item is recorded "
                 f"({o.repeats} repeat{'s' if o.repeats != 1 else ''} of each sample)")
    limit = f"; -t {o.run_time_s:g}s ends each run" if o.run_time_s else ""
    return (f"avv-locust: the run's shape sets the users — it {users}{limit}. Number of users, Ramp up and Host "
            f"are not used (vendor URLs come from {Path(o.config).name}). Each START begins a new run folder under "
            f"{o.out}/; STOP, or the last item, scores it: see the Vendors tab, and Download Data for records.csv, "
            "scores.csv and report.html.")


def plain_text(message: str, status: int) -> Response:
    """A ``text/plain`` answer that no browser renders as HTML (and whose echoed parts are escaped anyway)."""
    response = make_response(message, status)
    response.headers["Content-Type"] = "text/plain; charset=utf-8"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def install_web_ui(environment: Environment, ctl: RunController, *, interval_s: float | None = None) -> LiveBoard:
    """Add the Vendors tab, the /avv routes and the start-form changes to ``environment.web_ui``; return the
    live board feeding them (the controller's: :func:`~avv_harness.locust.live_board.live_board`)."""
    web_ui = environment.web_ui
    if web_ui is None or web_ui.app is None:
        raise ValueError("install_web_ui: this environment has no web UI")
    app = web_ui.app
    from avv_harness.locust.prometheus import CONTENT_TYPE, exporter_for
    from avv_harness.locust.web_guard import guard_web_ui

    guard_web_ui(app, ctl.options.cors_origins)  # undoes Locust's CORS(app) for every origin not allow-listed

    board = live_board(ctl, interval_s)
    exporter = exporter_for(ctl)
    stress = ctl.options.is_stress
    agent = ctl.samples is not None and any(s.agent is not None for s in ctl.samples.samples)
    columns = vendor_columns(stress, len({v.model for v in ctl.vendors.values()}) > 1, agent)
    base = (getattr(environment.parsed_options, "web_base_path", None) or "").rstrip("/")
    from avv_harness.locust.web_login import install_login

    install_login(web_ui, base, os.environ, tls=bool(getattr(environment.parsed_options, "tls_cert", None)))
    tabs = [{"title": "Vendors", "key": VENDORS_KEY}]
    tables = [{"key": VENDORS_KEY, "structure": [{"key": k, "title": t} for k, t, _ in columns]}]
    if stress:
        tabs.append({"title": "Stress levels", "key": LEVELS_KEY})
        tables.append({"key": LEVELS_KEY, "structure": level_structure()})
    csv_files = [{"href": f"./avv/download/{name}", "title": f"Download avv {name} (current run)"}
                 for name in ("records.csv", "scores.csv", "report.html")]
    ui_args = {"extended_tabs": tabs, "extended_tables": tables, "extended_csv_files": csv_files,
               "hide_common_options": True, "missing_host_warning": False, "override_host_warning": False}
    original_update = web_ui.update_template_args

    def update_template_args() -> None:
        original_update()
        web_ui.template_args.update(ui_args)

    web_ui.update_template_args = update_template_args  # type: ignore[method-assign]  # Locust's, extended
    web_ui.template_args.update(ui_args)
    note = f'<div id="avv-note" style="{NOTE_STYLE}">{html.escape(shape_note(ctl))}</div>'

    @app.after_request
    def extend_responses(response: Response) -> Response:
        if request.path == f"{base}/stats/requests" and response.is_json:
            snap = board.snapshot()
            extended = [{"key": VENDORS_KEY, "data": vendor_rows(snap, columns)}]
            if stress:
                extended.append({"key": LEVELS_KEY, "data": level_rows(snap)})
            response.set_data(json.dumps({**response.get_json(), "extended_stats": extended}))
        elif request.path in (f"{base}/", base or "/") and response.mimetype == "text/html":
            page = response.get_data(as_text=True)
            response.set_data(page.replace("<body>", "<body>" + note, 1))
        return response

    blueprint = Blueprint("avv", __name__, url_prefix=f"{base}/avv")

    @blueprint.route("/live.json")
    @web_ui.auth_required_if_enabled
    def live_json() -> Response:
        return jsonify(board.snapshot())

    @blueprint.route("/metrics")
    @web_ui.auth_required_if_enabled
    def metrics() -> Response:
        return Response(exporter.exposition(), content_type=CONTENT_TYPE)

    @blueprint.route("/download/<name>")
    @web_ui.auth_required_if_enabled
    def download(name: str) -> Response:
        if name not in DOWNLOADS:
            abort(404)
        wanted = request.args.get("run")
        run = next((r for r in reversed(ctl.runs) if wanted in (None, r.run_id)), None)
        if run is None:
            return plain_text("no run yet: press START first" if wanted is None
                              else f"no run {html.escape(wanted)}", 404)
        path = run.run_dir / name
        filename = f"avv_{run.run_id}_{name}"
        if name == "scores.csv" and not path.is_file() and run is board.run and board.result is not None:
            from avv_scoring.report.outputs import scores_csv_text

            response = make_response(scores_csv_text(board.result))
            response.headers["Content-Type"] = "text/csv"
            response.headers["Content-Disposition"] = f"attachment;filename=avv_{run.run_id}_scores-so-far.csv"
            return response
        if not path.is_file():
            return plain_text(f"{name} of run {html.escape(run.run_id)} is written when the test stops", 404)
        return send_file(path.resolve(), mimetype=DOWNLOADS[name], as_attachment=name != "report.html",
                         download_name=filename, max_age=0)

    app.register_blueprint(blueprint)
    return board


NOTE_STYLE = ("font:13px/1.4 system-ui,sans-serif;padding:6px 16px;background:#fff8e1;color:#3c3c3c;"
              "border-bottom:1px solid #f0d98c")
