"""The metric registry: every function returns what it declared, declarations are checked, and every
table (score columns, IRF inputs, layouts, repeats, thresholds, README) is derived from it."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from avv_scoring import METRICS, SCORE_COLUMNS, Thresholds
from avv_scoring.cli import main
from avv_scoring.metrics import headline as M
from avv_scoring.metrics import registry
from avv_scoring.metrics import vendor_table as VT
from avv_scoring.metrics.declaration import Metric, RegistryError
from avv_scoring.metrics.irf import IRF_METRICS, IRF_TABLE_COLUMNS, irf_scores, resolve_irf_metrics
from avv_scoring.metrics.registry import FUNCTIONS, MODEL_FUNCTIONS, Registry, produces, render_metric_table
from avv_scoring.report.sections.counts import COUNT_LAYOUT
from avv_scoring.report.sections.scores import TABLE_LAYOUT
from avv_scoring.score import IDENTITY_COLUMNS, REPEAT_COLUMNS
from avv_scoring.testing import call, records_frame
from avv_scoring.verdict import verdict

TOOLS = {"1": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}


def _frames():
    """A small baseline + vendor table touching every metric: tool calls, a failure, usage, reasoning."""
    base = [
        {"vendor": "base", "is_baseline": True, "sample_id": "1", "finish_reason": "tool_calls",
         "tool_calls": [call("f", {"x": 1})], "ttft_ms": 100.0, "tps": 40.0, "total_tokens": 500},
        {"vendor": "base", "is_baseline": True, "sample_id": "2", "ttft_ms": 120.0, "tps": 45.0,
         "total_tokens": 400},
    ]
    ven = [
        {"vendor": "ven", "sample_id": "1", "finish_reason": "tool_calls", "tool_calls": [call("f", {"x": 2})],
         "ttft_ms": 80.0, "tps": 60.0, "total_tokens": 450, "attempts": 2},
        {"vendor": "ven", "sample_id": "2", "content": "", "reasoning_chars": 12, "ttft_ms": 90.0},
        {"vendor": "ven", "sample_id": "3", "status": "failed", "error_kind": "http_5xx"},
    ]
    frame = M.annotate_tool_calls(records_frame(base + ven), TOOLS)
    return frame[frame["vendor"] == "ven"], frame[frame["vendor"] == "base"]


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.name)
def test_each_function_returns_exactly_the_columns_it_declared(function):
    rows, base = _frames()
    out = function.func(rows, base) if function.inputs == "rows+baseline" else function.func(rows)
    assert set(out) == set(function.columns)
    for column in function.columns:
        assert registry.metric(column).column == column


def test_vendor_metrics_has_every_per_vendor_column_and_the_model_functions_the_rest():
    rows, base = _frames()
    model_columns = {c for f in MODEL_FUNCTIONS for c in f.columns}
    assert set(VT.vendor_metrics(rows, base)) == {m.column for m in METRICS} - model_columns
    assert sum(len(f.columns) for f in (*FUNCTIONS, *MODEL_FUNCTIONS)) == len(METRICS)
    assert {f.name: f.inputs for f in MODEL_FUNCTIONS} == {"uncertainty": "model", "conformance_failures": "model",
                                                          "identity": "model"}
    assert {f.name: f.inputs for f in FUNCTIONS}["trigger_f1"] == "rows+baseline"
    assert {f.name: f.inputs for f in FUNCTIONS}["schema_accuracy"] == "rows"


def test_registering_a_column_twice_raises_and_changes_nothing():
    before = registry.METRICS
    with pytest.raises(RegistryError, match="'f1' is already registered .by trigger_f1"):
        produces(Metric("f1", "F1 again", "rate", "higher"))(lambda rows: {"f1": 1.0})
    assert registry.METRICS == before

    reg = Registry()
    reg.produces(Metric("a", "A", "int", "none"))(lambda rows: {"a": 1})
    with pytest.raises(RegistryError, match="already registered"):
        reg.produces(Metric("b", "B", "int", "none"), Metric("a", "A", "int", "none"))(lambda rows: {})
    assert [m.column for m in reg.metrics()] == ["a"]  # b was not half-registered
    with pytest.raises(RegistryError, match="declared twice"):
        reg.produces(Metric("c", "C", "int", "none"), Metric("c", "C", "int", "none"))

    def f(rows):
        return {"d": 1}

    reg.produces(Metric("d", "D", "int", "none"))(f)
    with pytest.raises(RegistryError, match="f is already registered"):
        reg.produces(Metric("e", "E", "int", "none"))(f)


def test_bad_declarations_raise():
    with pytest.raises(RegistryError, match="IRF input needs a direction"):
        Metric("x", "X", "int", "none", irf=True)
    with pytest.raises(RegistryError, match="fmt"):
        Metric("x", "X", "percent", "higher")
    with pytest.raises(RegistryError, match="better"):
        Metric("x", "X", "rate", "up")
    with pytest.raises(RegistryError, match="kind"):
        Metric("x", "X", "rate", "higher", threshold=("atleast", 0.5))
    with pytest.raises(RegistryError, match="text column"):
        Metric("x", "X", "text", "none", threshold=("min", 1))
    with pytest.raises(RegistryError, match="snake_case"):
        Metric("X Y", "X", "rate", "higher")


def test_a_function_returning_undeclared_columns_is_caught():
    reg = Registry()

    @reg.produces(Metric("a", "A", "int", "none"))
    def sloppy(rows):
        return {"a": 1, "b": 2}

    (entry,) = reg.functions()
    with pytest.raises(RegistryError, match="undeclared: b"):
        entry(None, None)


def test_score_and_repeat_columns_come_from_the_registry():
    repeat = [m.column for m in METRICS if m.per_repeat]
    metric_columns = SCORE_COLUMNS[len(IDENTITY_COLUMNS):len(IDENTITY_COLUMNS) + len(METRICS)]
    assert SCORE_COLUMNS == (
        *IDENTITY_COLUMNS,
        *metric_columns,
        "n_repeats",
        *(f"{c}_{s}" for c in repeat for s in ("mean", "std")),
    )
    assert sorted(metric_columns) == sorted(m.column for m in METRICS)  # every metric once
    bounds = {f"{m.column}_ci_{end}" for m in METRICS if m.interval for end in ("low", "high")}
    # registry order, each interval right after its metric (before: tps_ci_low, loop_rate, tps_ci_high)
    assert [c for c in metric_columns if c not in bounds] == [m.column for m in METRICS if m.column not in bounds]
    for m in METRICS:
        if m.interval:
            at = metric_columns.index(m.column)
            assert metric_columns[at + 1:at + 3] == (f"{m.column}_ci_low", f"{m.column}_ci_high"), m.column
    assert VT.REPEAT_METRICS == tuple(repeat)
    assert REPEAT_COLUMNS == ("model", "vendor", "repeat", *repeat)
    # the six IRF inputs come first, with today's names, order and directions
    assert [c for c in metric_columns if c not in bounds][:6] == [
        "success_rate", "f1", "schema_accuracy", "avg_tokens", "avg_ttft_ms", "tps"
    ]


def test_irf_inputs_come_from_the_registry():
    assert IRF_METRICS == {m.column: m.better == "higher" for m in METRICS if m.irf}
    assert IRF_METRICS == {
        "success_rate": True, "f1": True, "schema_accuracy": True, "avg_tokens": False, "avg_ttft_ms": False,
        "tps": True,
    }
    assert IRF_TABLE_COLUMNS == ("model", "vendor", *IRF_METRICS)


def test_irf_over_a_chosen_list_of_metrics():
    table = pd.DataFrame({"model": "m", "vendor": ["a", "b"], "tps": [10, 20], "tool_match": [1.0, 0.5],
                          "f1": [0.1, 0.9]})
    assert irf_scores(table, ["tps", "tool_match"]).tolist() == pytest.approx([1 / 7 + 1 / 6, 1 / 6 + 1 / 7])
    assert resolve_irf_metrics(["avg_ttft_ms"]) == {"avg_ttft_ms": False}
    for bad, message in ((["items"], "no better direction"), (["nope"], "not a metric"), ([], "at least one"),
                         (["f1", "f1"], "twice")):
        with pytest.raises(Exception, match=message):
            resolve_irf_metrics(bad)


def test_cli_irf_metrics_flag(tmp_path, capsys):
    src = tmp_path / "t.csv"
    src.write_text("model,vendor,tps,tool_match\nm,a,10,1\nm,b,20,0.5\n", encoding="utf-8")
    assert main(["irf", str(src), "--irf-metrics", "tps,tool_match"]) == 0
    both = f"{1 / 7 + 1 / 6:.4f}"  # a: 1st on tool_match, 2nd on tps; b the other way round
    assert capsys.readouterr().out.splitlines()[1:] == [f"m,a,10,1,{both}", f"m,b,20,0.5,{both}"]
    with pytest.raises(SystemExit) as exit_info:
        main(["irf", str(src), "--irf-metrics", "items"])
    assert exit_info.value.code == 2
    assert "no better direction" in capsys.readouterr().err


def test_table_layouts_come_from_the_registry():
    shown = [m for m in METRICS if m.table]
    shown.sort(key=lambda m: m.order if m.table_order is None else m.table_order)
    assert TABLE_LAYOUT == (("Vendor", "vendor", "text"), ("IRF", "irf", "irf"),
                            *((m.header, m.column, m.fmt) for m in shown))
    # the published layout
    assert [h for h, _, _ in TABLE_LAYOUT] == [
        "Vendor", "IRF", "Success Rate", "F1", "TPS", "Schema Accuracy", "TTFT (ms)", "Avg Token"
    ]
    assert COUNT_LAYOUT == tuple((m.header, m.column, m.fmt) for m in METRICS if m.count)
    assert {c for _, c, _ in COUNT_LAYOUT} >= {"items", "failures", "f1_pairs", "f1_excluded", "f1_unmatched"}


def test_default_thresholds_come_from_the_registry():
    expected = [(m.column, *m.threshold) for m in METRICS if m.threshold]
    assert Thresholds().checks() == expected
    assert expected == [("success_rate", "min", 0.99), ("f1", "min", 0.8), ("schema_accuracy", "min", 0.98),
                        ("reasoning_only_rate", "max", 0.0), ("tool_call_as_text_rate", "max", 0.0),
                        ("tool_call_truncated_rate", "max", 0.0), ("conformance_failures", "max", 0.0),
                        ("invalid_json_call_rate", "max", 0.0)]
    defects = [m.column for m in METRICS if m.defect]  # every zero bound of the defaults on records is a defect check
    assert defects == [c for c, kind, limit in expected if kind == "max" and limit == 0 and c != "conformance_failures"]


def test_thresholds_overrides():
    t = Thresholds(min_success_rate=0.9, min_f1=None)
    assert dict(t) == {"success_rate": (("min", 0.9),), "schema_accuracy": (("min", 0.98),),
                       "reasoning_only_rate": (("max", 0.0),), "tool_call_as_text_rate": (("max", 0.0),),
                       "tool_call_truncated_rate": (("max", 0.0),), "invalid_json_call_rate": (("max", 0.0),),
                       "conformance_failures": (("max", 0.0),)}
    assert t.min_success_rate == 0.9 and t.min_f1 is None and t.max_success_rate is None
    assert Thresholds(**t.to_dict()) == t
    # any registered metric, one line; None removes a bound
    assert t.with_bound("tps", "min", 20)["tps"] == (("min", 20.0),)
    assert Thresholds({"avg_ttft_ms": ("max", 500), "f1": None}).checks()[1:3] == [
        ("schema_accuracy", "min", 0.98), ("avg_ttft_ms", "max", 500.0)
    ]
    assert Thresholds.none().checks() == [] and Thresholds.none().name == "none" and t.name == "avv"
    assert Thresholds(max_reasoning_only_rate=0.05)["reasoning_only_rate"] == (("max", 0.05),)
    replaced = Thresholds(min_success_rate=None, max_success_rate=1.0)
    assert replaced["success_rate"] == (("max", 1.0),) and Thresholds(**replaced.to_dict()) == replaced
    for bad, message in ((dict(min_nope=1), "not a metric"), (dict(min_tps=2, max_tps=1), "min 2 above max 1"),
                         (dict(minimum_f1=1), "min_<metric>"), (dict(min_error_kinds=1), "text column")):
        with pytest.raises(ValueError, match=message):
            Thresholds(**bad)
    with pytest.raises(AttributeError):
        t.x = 1


def test_a_metric_can_hold_a_band():
    band = Thresholds(min_tps=10, max_tps=20)
    assert band["tps"] == (("min", 10.0), ("max", 20.0)) and ("tps", "max", 20.0) in band.checks()
    assert Thresholds(**band.to_dict()) == band
    # a second kind adds to the default bound; the mapping form replaces the column's bounds
    assert Thresholds(max_success_rate=1)["success_rate"] == (("min", 0.99), ("max", 1.0))
    assert Thresholds({"success_rate": [("min", 0.5), ("max", 0.6)]})["success_rate"] == (("min", 0.5), ("max", 0.6))
    assert Thresholds({"success_rate": ("max", 0.6)})["success_rate"] == (("max", 0.6),)
    assert band.with_bound("tps", "max", None)["tps"] == (("min", 10.0),)
    assert "10 ≤ tps ≤ 20" in band.text()
    off = Thresholds.none().with_bound("tps", "min", 10).with_bound("tps", "max", 20)
    assert verdict({"tps": 15}, off) == ("pass", [])
    assert verdict({"tps": 9.5}, off) == ("fail", ["tps 9.5 < 10"])
    assert verdict({"tps": 21}, off) == ("fail", ["tps 21 > 20"])
    assert verdict({"tps": math.nan}, off) == ("fail", ["tps missing"])  # named once, not per bound


def test_verdict_on_any_registered_bound():
    t = Thresholds.none().with_bound("avg_ttft_ms", "max", 100)
    assert verdict({"avg_ttft_ms": 120.0}, t) == ("fail", ["avg_ttft_ms 120 > 100"])
    assert verdict({"avg_ttft_ms": math.nan}, t) == ("fail", ["avg_ttft_ms missing"])
    assert verdict({"avg_ttft_ms": 80}, t) == ("pass", [])


def test_metric_table_has_one_row_per_metric():
    lines = render_metric_table().splitlines()
    assert lines[0] == "| Column | Header | Better | IRF input | Default threshold | Formula |"
    assert len(lines) == 2 + len(METRICS)
    assert lines[2].startswith("| `success_rate` | Success Rate | higher | yes | ≥ 0.99 |")
    assert all(m.doc for m in METRICS), "every metric has a one-line formula"


def test_cli_prints_the_metric_table(capsys):
    assert main(["metrics"]) == 0
    assert capsys.readouterr().out == render_metric_table() + "\n"


# ------------------------------------------------------------------------------ one declaration, found by itself


def test_every_module_of_the_metrics_package_is_loaded_without_a_list():
    package = Path(registry.__file__).parent
    files = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    assert {name.rsplit(".", 1)[1] for name in registry.metric_modules()} == files
    declared = {f.func.__module__ for f in (*FUNCTIONS, *MODEL_FUNCTIONS)}
    assert declared <= set(registry.metric_modules())  # every metric is declared in a module of the package


def test_direct_orders_are_unique_so_the_column_order_does_not_depend_on_the_import_order():
    loaded = registry.REGISTRY
    direct = [m for m in METRICS if m.column not in {c for f in MODEL_FUNCTIONS for c in f.columns}]
    orders = [m.order for m in direct]
    assert len(orders) == len(set(orders)), sorted(o for o in orders if orders.count(o) > 1)
    assert loaded.metrics() == METRICS


def test_interval_columns_follow_from_the_declarations():
    intervals = [m.column for m in registry.interval_metrics()]
    assert intervals[:8] == ["success_rate", "f1", "trigger_agreement", "schema_accuracy", "tool_match",
                             "args_match", "ttft_p50_ms", "tps"]  # scores.csv's order (a new one comes after them)
    model_columns = [c for f in MODEL_FUNCTIONS for c in f.columns]
    assert [c for c in model_columns if "_ci_" in c] == [f"{m}_ci_{end}" for m in intervals for end in ("low", "high")]
    for column in intervals:
        assert registry.function_of(column).additive is not None  # resampled from its own declaration
        assert registry.metric(f"{column}_ci_low").fmt == registry.metric(column).fmt


def test_a_derived_declaration_sees_every_direct_one_and_sorts_after_them_at_equal_order():
    from avv_scoring.metrics.additive import additive, rate

    reg = Registry()

    @reg.produces_derived(lambda metrics: [Metric(f"{m.column}_ci_low", "low", "rate", "none", order=5)
                                           for m in metrics if m.interval])
    def model(model_table):
        return {}

    @reg.produces(Metric("a", "A", "rate", "higher", interval=True, order=5), Metric("n", "N", "int", "none", order=1))
    @additive(lambda rows: pd.DataFrame({"x": rows}))
    def a(sums):
        return {"a": rate(sums["x"], 2), "n": 2}

    assert [m.column for m in reg.metrics()] == ["n", "a", "a_ci_low"]
    assert reg.function_of("a_ci_low").func is model and reg.model_functions()[0].columns == ("a_ci_low",)


def test_an_interval_needs_an_additive_form():
    reg = Registry()
    with pytest.raises(RegistryError, match="needs an additive form"):
        reg.produces(Metric("r", "R", "rate", "higher", interval=True))(lambda rows: {"r": 1.0})
    with pytest.raises(RegistryError, match="rate or a number"):
        Metric("t", "T", "text", "none", interval=True)


def test_reading_the_registry_while_the_metric_modules_load_raises(monkeypatch):
    monkeypatch.setitem(registry._state, "loaded", False)
    monkeypatch.setitem(registry._state, "loading", True)
    with pytest.raises(RegistryError, match="while the metric modules were being imported"):
        registry.metric("f1")


def test_each_form_resamples_every_sum_its_resampled_columns_read():
    """A resample passes 0 for the sums a form does not resample: the resampled columns must not read them."""
    from avv_scoring.metrics.uncertainty import resampled_metrics

    rows, base = _frames()
    for column in (m.column for m in resampled_metrics()):
        function = registry.function_of(column)
        form = function.additive
        frame = form.features(rows, base) if function.inputs == "rows+baseline" else form.features(rows)
        sums = frame.sum()
        kept = {name: (sums[name] if name in form.resampled_sums(frame) else 0) for name in frame.columns}
        if form.quantiles is not None and column in form.quantiles.columns:
            continue  # a percentile reads the values, not the sums
        full, resampled = form.combine(sums)[column], form.combine(kept)[column]
        assert full == resampled or (math.isnan(full) and math.isnan(resampled)), column
