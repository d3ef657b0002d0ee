"""Prometheus metrics of the current run (harness layer): ``/avv/metrics`` on the master's web UI and, with
``--avv-metrics-port``, a plain metrics server for headless runs (on ``--avv-metrics-host``, loopback by default).

Every metric is declared once in :func:`prom_metrics` (name, type, labels, help, where its value comes from); a
score's gauge ``avv_<column>`` is declared on its metric in the registry (``Metric(prometheus="HELP line")``,
:func:`avv_scoring.metrics.registry.prometheus_metrics`). The docs table (``python -m avv_harness.docs``) and the
exposition are both derived from it. Values are
the live board's (:class:`avv_harness.locust.live_board.LiveBoard`): the gauges read its snapshot when scraped,
so a scrape shows exactly what the Vendors tab and ``/avv/live.json`` show; the histograms (TTFT, TPS) and the
anomaly counter are fed by the same ``avv_record`` hook as the board. Each :class:`MetricsExporter` has its own
``CollectorRegistry`` (not prometheus_client's global one): several environments can live in one process (the
tests run masters and workers in one), and each must show only its own run. Nothing here holds a key: the labels
are the config's model and vendor names and the wire format.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from avv_core.client_load import process_name
from avv_core.decision_options import VERDICTS
from avv_core.items import VendorId
from avv_core.json_types import JSONObject, JSONValue
from avv_core.measures import is_missing, percentile
from avv_core.records import STATUS_SUCCESS, Record

if TYPE_CHECKING:
    from gevent.pywsgi import WSGIServer
    from locust.env import Environment

    from avv_harness.locust.live_board import LiveBoard
    from avv_harness.run.controller import RunController

log = logging.getLogger("avv")

Kind = Literal["gauge", "counter", "histogram"]
VENDOR_LABELS = ("model", "vendor", "endpoint")
#: TTFT buckets, seconds: from a fast local model to a cold, queued one.
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
#: Output tokens per second buckets.
TPS_BUCKETS = (5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)
#: Lag samples kept per process for its p99 (a window: memory stays bounded however long the run).
LAG_WINDOW = 10_000
CONTENT_TYPE = CONTENT_TYPE_LATEST


@dataclass(frozen=True)
class PromMetric:
    """One exposed metric. ``read`` (gauges of a vendor) takes the vendor's entry of the live board's snapshot."""

    name: str  # the exposed name (a counter's ends in _total)
    kind: Kind  # gauge | counter | histogram
    labels: tuple[str, ...]  # label names
    help: str  # the HELP line and the docs' meaning
    read: Callable[[JSONObject], JSONValue] | None = None  # per-vendor gauges: value from the snapshot entry
    buckets: tuple[float, ...] = ()  # histograms: upper bounds


def _score(column: str) -> Callable[[JSONObject], JSONValue]:
    return lambda entry: entry["scores"].get(column)


def prom_metrics() -> tuple[PromMetric, ...]:
    """Every exposed metric, in the docs' and the exposition's order: the item counts, the registry's score gauges
    (``avv_<column>``, in registry order), the verdict, then the others."""
    from avv_scoring.metrics.registry import prometheus_metrics  # lazily: the registry loads every metric module

    scores = tuple(PromMetric(f"avv_{m.column}", "gauge", VENDOR_LABELS, m.prometheus, _score(m.column))
                   for m in prometheus_metrics())
    return (*_COUNTS, *scores, *_OTHERS)


def __getattr__(name: str) -> object:
    if name == "PROM_METRICS":
        return prom_metrics()
    if name == "BY_NAME":
        return {m.name: m for m in prom_metrics()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PROM_METRICS: tuple[PromMetric, ...]  # :func:`prom_metrics` (lazy)
BY_NAME: dict[str, PromMetric]  # name → :class:`PromMetric` (lazy)


def _help(name: str) -> str:
    return next(m.help for m in (*_COUNTS, *_OTHERS) if m.name == name)

_COUNTS: tuple[PromMetric, ...] = (
    PromMetric("avv_items_done", "gauge", VENDOR_LABELS, "Items recorded so far in the current run (an agent task "
               "is one item).", lambda e: e["items_done"]),
    PromMetric("avv_items_total", "gauge", VENDOR_LABELS, "Items the current run will record (verify mode; absent "
               "in stress mode, which has no fixed total).", lambda e: e["items_total"]),
    PromMetric("avv_items_failed", "gauge", VENDOR_LABELS, "Items recorded as failed so far.",
               lambda e: e["failed"]),
)
_OTHERS: tuple[PromMetric, ...] = (
    PromMetric("avv_verdict", "gauge", (*VENDOR_LABELS, "verdict"), "The decision so far, as a state set: 1 for the "
               "vendor's verdict (`PASS`, `FAIL` or `INCONCLUSIVE`, at the run's confidence and thresholds), 0 for "
               "the other two (absent until scored)."),
    PromMetric("avv_samples_to_decide", "gauge", VENDOR_LABELS, "INCONCLUSIVE so far: about how many more samples "
               "would decide the verdict (`samples_to_decide`; absent otherwise).", _score("samples_to_decide")),
    PromMetric("avv_ttft_seconds", "histogram", VENDOR_LABELS, "TTFT of successful requests, seconds (records "
               "stored by this process since it started).", buckets=TTFT_BUCKETS),
    PromMetric("avv_tps", "histogram", VENDOR_LABELS, "Output tokens per second of successful requests (`tps`).",
               buckets=TPS_BUCKETS),
    PromMetric("avv_anomalies_total", "counter", (*VENDOR_LABELS, "kind"), "Anomaly flags on stored records, by "
               "kind (the anomaly table of records.csv)."),
    PromMetric("avv_client_lag_p99_ms", "gauge", ("process",), "Event-loop lag p99 of each Locust process that "
               f"runs users (`client_lag_ms` of its last {LAG_WINDOW:,} records), ms: above 5 the process is "
               "client-bound."),
    PromMetric("avv_stress_level", "gauge", (), "Stress mode: the current level (users per vendor); absent in "
               "verify mode."),
    PromMetric("avv_records", "gauge", (), "Rows of the current run stored so far (records.csv's rows)."),
    PromMetric("avv_run_info", "gauge", ("run_id", "mode", "state"), "1 for the current run: its id, mode "
               "(verify / stress) and state (running / finished)."),
)


def render_prom_table() -> str:
    """The docs table of the metrics (Markdown, no trailing newline)."""
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for m in prom_metrics():
        labels = ", ".join(f"`{label}`" for label in m.labels)
        rows.append(f"| `{m.name}` | {m.kind} | {labels} | {m.help.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


class _SnapshotCollector(Collector):
    """The gauges, read from the live board's snapshot at each scrape (never scores anything itself)."""

    def __init__(self, exporter: MetricsExporter):
        self.exporter = exporter

    def collect(self) -> Iterator[Metric]:
        ex = self.exporter
        snap = ex.board.snapshot()
        declared = prom_metrics()
        families = {m.name: GaugeMetricFamily(m.name, m.help, labels=list(m.labels))
                    for m in declared if m.kind == "gauge"}
        for entry in snap["vendors"]:
            labels = ex.labels_of(VendorId(entry["model"], entry["vendor"]))
            for m in declared:
                if m.read is not None:
                    value = m.read(entry)
                    if not is_missing(value):
                        families[m.name].add_metric(labels, float(value))
            verdict = entry["scores"].get("verdict")
            if verdict in VERDICTS:
                for state in VERDICTS:
                    families["avv_verdict"].add_metric([*labels, state], 1.0 if state == verdict else 0.0)
        for process, lags in sorted(ex.lags.items()):
            p99 = percentile(lags, 99)
            if not is_missing(p99):
                families["avv_client_lag_p99_ms"].add_metric([process], p99)
        if snap["level"] is not None:
            families["avv_stress_level"].add_metric([], float(snap["level"]))
        families["avv_records"].add_metric([], float(snap["records"]))
        if snap["run_id"] is not None:
            families["avv_run_info"].add_metric([snap["run_id"], snap["mode"], snap["state"]], 1.0)
        yield from families.values()

    def describe(self) -> Iterator[Metric]:
        return iter(())  # the families depend on the run: not described ahead


class MetricsExporter:
    """The Prometheus view of one controller's runs, in its own registry (see the module docstring)."""

    def __init__(self, ctl: RunController, board: LiveBoard):
        self.ctl = ctl
        self.board = board
        self.registry = CollectorRegistry(auto_describe=False)
        self._labels = {ctl.vendor_id(name): [v.model, v.name, v.dialect.endpoint] for name, v in ctl.vendors.items()}
        self.lags: dict[str, deque[float]] = {}
        self.ttft = Histogram("avv_ttft_seconds", _help("avv_ttft_seconds"), VENDOR_LABELS,
                              buckets=TTFT_BUCKETS, registry=self.registry)
        self.tps = Histogram("avv_tps", _help("avv_tps"), VENDOR_LABELS, buckets=TPS_BUCKETS,
                             registry=self.registry)
        self.anomalies = Counter("avv_anomalies", _help("avv_anomalies_total"), (*VENDOR_LABELS, "kind"),
                                 registry=self.registry)
        self.registry.register(_SnapshotCollector(self))
        self.server: WSGIServer | None = None
        ctl.record_hook.add_listener(self._on_records)

    def labels_of(self, vid: VendorId) -> list[str]:
        return self._labels.get(vid) or [vid.model, vid.vendor, ""]

    def _on_records(self, records: list[Record], **_: object) -> None:
        for record in records:
            labels = self.labels_of(VendorId(record["model"], record["vendor"]))
            if record.get("status") == STATUS_SUCCESS:
                if not is_missing(record.get("ttft_ms")):
                    self.ttft.labels(*labels).observe(float(record["ttft_ms"]) / 1000.0)
                if not is_missing(record.get("tps")):
                    self.tps.labels(*labels).observe(float(record["tps"]))
            for kind in (record.get("anomalies") or "").split(";"):
                if kind:
                    self.anomalies.labels(*labels, kind).inc()
            if not is_missing(record.get("client_lag_ms")):
                window = self.lags.setdefault(process_name(record.get("worker")), deque(maxlen=LAG_WINDOW))
                window.append(float(record["client_lag_ms"]))

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)

    def serve(self, host: str, port: int) -> int:
        """Serve the registry on ``host:port`` (``/metrics``, any path) in this process's event loop; the bound port."""
        from gevent.pywsgi import WSGIServer
        from prometheus_client import make_wsgi_app

        self.server = WSGIServer((host, port), make_wsgi_app(self.registry), log=None)
        self.server.start()
        bound = int(self.server.server_port)
        log.info("avv: Prometheus metrics on http://%s:%d/metrics", host or "0.0.0.0", bound)
        return bound

    def close(self) -> None:
        if self.server is not None:
            self.server.stop(timeout=1)


def exporter_for(ctl: RunController) -> MetricsExporter:
    """The controller's exporter (:meth:`~avv_harness.run.controller.RunController.view`), made on first use with
    the live board it reads (the web UI's, or made here when there is no web UI: a headless run with
    ``--avv-metrics-port``)."""
    from avv_harness.locust.live_board import live_board

    return ctl.view(MetricsExporter, lambda: MetricsExporter(ctl, live_board(ctl)))


def serve_metrics(environment: Environment, ctl: RunController) -> int | None:
    """With ``--avv-metrics-port``, serve the metrics on it, on ``--avv-metrics-host`` (default loopback: the
    endpoint has no authentication), in the process that holds the ledger only (workers send their records to
    it). The bound port, or None when not asked or not this process's job."""
    port = ctl.options.metrics_port
    if not port:
        return None
    if not ctl.role.holds_ledger:
        log.info("avv: --avv-metrics-port is served by the master (it holds the records); not on a worker")
        return None
    host = ctl.options.metrics_host
    return exporter_for(ctl).serve("" if host == "*" else host, port)
