"""IRF with statistical ties (``--irf-ties statistical``; avv_scoring/stats/irf.py): the rank rule on plain data, and
the audit case on constructed records — a vendor with F1 ≈ 0.74 and 37.5 % reasoning-only answers ranks first by
the published IRF only because it wins tokens, TTFT and TPS by 0.5 %, inside the noise; with statistical ties it
does not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from avv_scoring import score_frame
from avv_scoring.report.markdown import render_markdown
from avv_scoring.stats.irf import IRF_K, statistical_irf, statistical_ranks, tied_by_bootstrap
from avv_scoring.stats.uncertainty import StatsSettings
from avv_scoring.testing import call, records_frame

TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}


def test_the_rank_rule_on_plain_data():
    values = np.array([10.0, 9.9, 5.0, np.nan])
    tied = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], dtype=bool)
    ranks = statistical_ranks(values, tied, higher_is_better=True)
    assert ranks[:3].tolist() == [1.5, 1.5, 3.0] and math.isnan(ranks[3])  # the two tied share ranks 1 and 2
    assert statistical_ranks(values, np.eye(4, dtype=bool), True)[:3].tolist() == [1.0, 2.0, 3.0]  # published
    # not transitive: a ~ b, b ~ c, a separated from c
    chain = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=bool)
    assert statistical_ranks(np.array([3.0, 2.0, 1.0]), chain, True).tolist() == [1.5, 2.0, 2.5]


def test_tied_by_bootstrap_reads_the_interval_of_the_difference():
    rng = np.random.default_rng(0)
    same = rng.normal(0, 1, 400)
    draws = np.stack([same + 0.01 * rng.normal(size=400), same + rng.normal(0, 0.5, 400) + 0.05,
                      same + 3.0], axis=1)  # (resamples, vendors)
    tied = tied_by_bootstrap(np.array([0.0, 0.05, 3.0]), draws)
    assert tied[0, 1] and tied[1, 0] and not tied[0, 2] and not tied[1, 2] and tied.diagonal().all()
    assert (tied_by_bootstrap(np.array([1.0, 1.0, 2.0]), None) == np.array(
        [[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=bool)).all()  # not resampled: tied only when equal
    irf, _ = statistical_irf({"m": np.array([1.0, 1.0])}, {"m": None}, {"m": True})
    assert irf.tolist() == [round(1 / (1.5 + IRF_K), 12)] * 2


N = 48  # samples; the baseline calls on 32 of them
CALLS_ON = set(range(32))
REASONING_ONLY = set(range(13)) | set(range(32, 37))  # 13 calling items + 5 answers: 18 of 48 = 37.5 %


def _noise(seed: int, scale: float) -> np.ndarray:
    """Per-item noise whose mean is exactly 0: the vendors' observed means keep their constructed order."""
    e = np.random.default_rng(seed).normal(0.0, scale, N)
    return e - e.mean()


def _vendor(name: str, factor: float, seed: int, reasoning_only: set[int] = frozenset()) -> list[dict]:
    """``factor`` < 1: fewer tokens, lower TTFT and higher TPS by 1 − factor, on average."""
    tokens, ttft, tps = 400 * factor + _noise(seed, 60), 300 * factor + _noise(seed + 1, 45), \
        100 / factor + _noise(seed + 2, 15)
    rows = []
    for i in range(N):
        row = {"vendor": name, "sample_id": str(i), "total_tokens": int(round(tokens[i])), "ttft_ms": ttft[i],
               "tps": tps[i], "is_baseline": name == "base"}
        if i in reasoning_only:
            row.update(content="", reasoning_chars=200)
        elif i in CALLS_ON:
            row.update(finish_reason="tool_calls", tool_calls=[call("lookup", {"q": f"item {i}"})], content="")
        else:
            row.update(content="An answer.")
        rows.append(row)
    return rows


def _audit(ties: str):
    rows = _vendor("base", 1.0, 1) + _vendor("steady", 1.0, 11) + _vendor("audit", 0.995, 21, REASONING_ONLY)
    return score_frame(records_frame(rows), {str(i): [TOOL] for i in range(N)},
                       stats=StatsSettings(resamples=400, irf_ties=ties))


@pytest.fixture(scope="module")
def audit():
    return _audit("statistical")


def test_the_audit_case(audit):
    scores = audit.scores.set_index("vendor")
    a = scores.loc["audit"]
    assert a["f1"] == pytest.approx(38 / 51) and a["reasoning_only_rate"] == pytest.approx(0.375)
    for column in ("avg_tokens", "avg_ttft_ms"):  # wins by under 1 %
        assert 0.99 < a[column] / scores.loc["steady", column] < 1.0
    assert 1.0 < a["tps"] / scores.loc["steady", "tps"] < 1.01
    # the published IRF: first, by winning three speed ranks by 0.5 %
    assert scores["irf"].idxmax() == "audit"
    # statistical ties: the speed differences are noise (tied), F1 is not: last
    assert scores["irf_statistical"].idxmin() == "audit" and scores["irf_statistical"].idxmax() != "audit"
    assert "tps:" in a["irf_tied_with"] and "avg_tokens:" in a["irf_tied_with"] and "f1:" not in a["irf_tied_with"]
    assert audit.scores["vendor"].tolist()[-1] == "audit"  # the tables follow the statistical IRF
    md = render_markdown(audit)
    assert "IRF with statistical ties (the default ranking)" in md
    assert "| Vendor | IRF | Rank | IRF (statistical ties) | Rank (statistical ties) | Tied with |" in md


def test_the_published_irf_stays_the_default(audit):
    published = _audit("published")
    assert published.scores["irf_statistical"].isna().all() and published.scores["vendor"].tolist()[0] == "audit"
    assert "statistical ties" not in render_markdown(published)
    same = published.scores.set_index("vendor")["irf"]
    assert audit.scores.set_index("vendor")["irf"].to_dict() == same.to_dict()  # the published IRF unchanged
