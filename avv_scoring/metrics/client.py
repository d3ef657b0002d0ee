"""Metrics of the client's own load and of streams that were not streamed (registered like every metric).

Formulas (one vendor's rows):

- ``client_lag_p50_ms`` / ``client_lag_p99_ms`` = percentiles of ``client_lag_ms`` over the rows that have
  it: how much of the TTFT may be the Locust process's own delay (see avv_harness/run/lag_monitor.py);
- ``buffered_rows`` = successful rows flagged ``buffered_stream`` (their ``tps`` is empty, so they are left
  out of the TPS mean; their TTFT and latency count);
- ``stale_conn_retries`` = Σ ``stale_conn_retries``: sends the client repeated because its own pooled
  connection had gone stale (never counted as a vendor attempt).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from avv_core.measures import percentile
from avv_scoring.load import is_success, numeric
from avv_scoring.metrics.additive import Columns
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.registry import produces


def _numbers(rows: pd.DataFrame, column: str) -> pd.Series:
    if column not in rows.columns:
        return pd.Series([], dtype=float)
    return numeric(rows[column]).dropna()


@produces(
    Metric("client_lag_p50_ms", "Client lag p50 (ms)", "num", "lower", order=705,
           doc="median client_lag_ms over the vendor's rows: the client's own delay inside TTFT (upper bound)"),
    Metric("client_lag_p99_ms", "Client lag p99 (ms)", "num", "lower", order=715,
           doc="99th percentile of client_lag_ms; above 5 ms the process was client-bound (docs: How the harness "
               "measures time)"),
)
def client_lag(rows: pd.DataFrame) -> Columns:
    """``client_lag_p50_ms``, ``client_lag_p99_ms`` = percentiles (linear interpolation) of ``client_lag_ms``
    over the rows that have one; missing when none has (a run made before the lag monitor existed)."""
    values = _numbers(rows, "client_lag_ms").to_numpy(dtype=float)
    return {"client_lag_p50_ms": percentile(values, 50), "client_lag_p99_ms": percentile(values, 99)}


@produces(
    Metric("buffered_rows", "Buffered streams", "int", "none", count=True, order=720,
           doc="successful rows flagged buffered_stream (left out of the TPS mean; TTFT and latency kept)"),
    Metric("stale_conn_retries", "Stale-connection resends", "int", "none", order=730,
           doc="Σ stale_conn_retries: resends on a fresh connection after the client's pooled one went stale"),
)
def stream_health(rows: pd.DataFrame) -> Columns:
    """``buffered_rows`` = successful rows whose ``anomalies`` include ``buffered_stream``;
    ``stale_conn_retries`` = Σ ``stale_conn_retries`` (an empty cell counts 0)."""
    if "anomalies" in rows.columns:  # a handful of distinct cells: each is split once
        codes, cells = pd.factorize(rows["anomalies"].astype("object").fillna(""))
        flagged = np.array(["buffered_stream" in str(a).split(";") for a in cells] + [False], dtype=bool)[codes]
        buffered = int((is_success(rows).to_numpy(dtype=bool) & flagged).sum())
    else:
        buffered = 0
    return {"buffered_rows": buffered, "stale_conn_retries": int(_numbers(rows, "stale_conn_retries").sum())}
