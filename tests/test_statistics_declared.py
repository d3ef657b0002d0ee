"""Statistics declared once: a metric's declaration says whether it has an interval, a noise floor (and its test), a
power estimate, a history test, a place on the web UI and a Prometheus gauge, and every list of those is derived
from the registry — so adding the flag to a declaration is the only change needed (a synthetic metric shows it)."""

from __future__ import annotations

import pandas as pd
import pytest

from avv_harness.docs import _interval_metrics
from avv_harness.locust import prometheus
from avv_harness.locust.web_ui import vendor_columns
from avv_scoring import statistical_verdict
from avv_scoring.history import regression
from avv_scoring.history.store import item_frame
from avv_scoring.history.trend import ITEM_COLUMNS
from avv_scoring.metrics import model_level, registry, uncertainty
from avv_scoring.metrics.additive import Columns, Sums, additive, rate
from avv_scoring.metrics.declaration import Metric, NoiseFloor, Ratio, RegistryError, Regression
from avv_scoring.metrics.registry import METRICS, REGISTRY, Registry
from avv_scoring.report.sections import uncertainty as section

SYNTHETIC = "synthetic_rate"


def flagged(flag: str) -> list[str]:
    return [m.column for m in METRICS if getattr(m, flag)]


def test_each_derived_list_is_the_registrys_flags():
    assert list(uncertainty.POWER_METRICS) == flagged("power") == ["f1", "schema_accuracy"]
    assert list(uncertainty.CI_METRICS) == [m.column for m in registry.interval_metrics()]
    tested = [m for m in registry.noise_floor_metrics() if m.noise_floor and m.noise_floor.test]
    assert {m.column for m in registry.noise_floor_metrics()} == set(flagged("noise_floor"))
    assert list(uncertainty.NOISE_TESTS) == [m.noise_floor.test for m in tested]  # type: ignore[union-attr]
    assert {test: of for test, (of, *_) in uncertainty.NOISE_TESTS.items()} == {
        "noise_p": "trigger_agreement", "tool_match_noise_p": "tool_match", "args_match_noise_p": "args_match"}
    assert statistical_verdict.VERDICT_TESTS == (
        ("noise_p", "trigger disagreement", "trigger_agreement", "baseline_self_agreement"),
        ("tool_match_noise_p", "tool mismatch", "tool_match", "baseline_self_tool_match"),
        ("args_match_noise_p", "argument mismatch", "args_match", "baseline_self_args_match"))
    assert section.agreement_pairs() == (("f1", "baseline_self_f1"), ("tool_match", "baseline_self_tool_match"),
                                         ("args_match", "baseline_self_args_match"))
    assert section.noise_floors()["trigger_agreement"] == "baseline_self_agreement"
    tests = regression.regression_tests()
    assert [t.key for t in tests] == flagged("regression")
    assert all(t.header == registry.metric(t.key).header and t.better == registry.metric(t.key).better
               for t in tests)  # the registry's names: "Success Rate", not "Success rate"
    assert all(t.item in ITEM_COLUMNS for t in tests)  # each reads a column the history stores
    web = [c for c, _, _ in vendor_columns(stress=False, several_models=False, agent=True)]
    assert web[web.index("failed") + 1:web.index("anomalies")] == [m.column for m in registry.web_metrics(agent=True)]
    assert set(flagged("web")) | set(flagged("table")) == {m.column for m in registry.web_metrics(agent=True)}
    gauges = [m.name for m in prometheus.PROM_METRICS if m.name.removeprefix("avv_") in flagged("prometheus")]
    assert gauges == [f"avv_{c}" for c in flagged("prometheus")]
    assert gauges == ["avv_success_rate", "avv_f1", "avv_schema_accuracy", "avv_tool_match"]


def test_a_power_estimate_is_its_ratio_forms_proportion():
    """The sample-size fallback's (successes, trials) are the declared ratio form's numerator and denominator: for
    F1 (2·TP, 2·TP + FP + FN), for schema accuracy (valid, valid + invalid) — what POWER_METRICS held by hand."""
    sums = {"tp": 3.0, "fp": 1.0, "fn": 2.0, "tn": 4.0, "pairs": 10.0, "valid_calls": 7.0, "invalid_calls": 2.0}
    powers = uncertainty.power_estimates()
    assert [f(sums) for f in powers["f1"]] == [6.0, 9.0]
    assert [f(sums) for f in powers["schema_accuracy"]] == [7.0, 9.0]


def baseline_items() -> pd.DataFrame:
    """Two items of the history's ``items`` table (:data:`~avv_scoring.history.trend.ITEM_COLUMNS`)."""
    return pd.DataFrame({"sample_id": ["a", "b"], "repeat": [1, 1], "success": [1, 1], "called": [1, 0],
                         "tools_sig": ["x", None], "schema_valid": [1.0, None], "ttft_ms": [100.0, 110.0],
                         "tps": [50.0, 40.0]})


def test_the_history_reads_its_outcomes_by_the_declared_item_and_kind():
    base = baseline_items()
    items = base.assign(called=[1, 1], tools_sig=["y", "z"], schema_valid=[0.0, 1.0], success=[1, 0])
    out = regression.outcomes(items, base)
    assert out["trigger_agreement"]["value"].tolist() == [1.0]  # only sample a: b failed
    assert out["tool_match"]["value"].tolist() == [0.0]
    assert out["success_rate"]["value"].tolist() == [1.0, 0.0]
    assert out["schema_response_accuracy"]["value"].tolist() == [0.0, 1.0]
    assert out["ttft_p50_ms"]["value"].tolist() == [100.0]  # a median: of successful items
    assert "trigger_agreement" not in regression.outcomes(items, None)  # the baseline is its own reference


def test_stored_schema_valid_is_the_registrys_response_accuracy_per_item():
    """A successful response with calls under another finish (stop) is not a schema response: NULL, as
    schema_response_accuracy leaves it out; a tool_calls finish without a call is invalid."""
    from avv_scoring.metrics.headline import annotate_tool_calls
    from avv_scoring.testing import call, records_frame

    tools = {"1": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    rows = [{"vendor": "v", "sample_id": "1", "repeat": r, "finish_reason": finish, "tool_calls": calls}
            for r, finish, calls in ((1, "tool_calls", [call("f", {})]), (2, "stop", [call("f", {})]),
                                     (3, "tool_calls", []))]
    items = item_frame(annotate_tool_calls(records_frame(rows), tools))
    assert items["schema_valid"].tolist()[0] == 1.0 and pd.isna(items["schema_valid"].tolist()[1])
    assert items["schema_valid"].tolist()[2] == 0.0


# ------------------------------------------------------------------------------- adding a flag is the only change


def _synthetic_features(rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"hits": (rows["status"] == "success").astype(int), "trials": 1}, index=rows.index)


@additive(_synthetic_features)
def synthetic(sums: Sums) -> Columns:
    """hits / trials."""
    return {SYNTHETIC: rate(sums["hits"], sums["trials"])}


def _with_synthetic(**flags) -> Registry:
    """The package's registry plus one synthetic rate declared with ``flags`` (the model-level columns derived
    anew, as on first use)."""
    real = REGISTRY
    real.metrics()
    reg = Registry()
    for function in (*real.functions(), *real.model_functions()):
        if function.func is not model_level.uncertainty:
            reg.produces(*(real.metric(c) for c in function.columns))(function.func)
    reg.produces(Metric(SYNTHETIC, "Synthetic Rate", "rate", "higher", order=5000,
                        ratio=Ratio((("hits", 1.0),), (("trials", 1.0),)), doc="hits / trials", **flags))(synthetic)
    reg.produces_derived(model_level.declarations)(model_level.uncertainty)
    return reg


FLAGS = {"interval": True, "power": True, "noise_floor": NoiseFloor("baseline_self_agreement"),
         "regression": Regression("rate", "success", 0.05), "web": 99, "prometheus": "A synthetic rate so far."}


def test_a_synthetic_metric_appears_in_every_derived_list(monkeypatch):
    reg = _with_synthetic(**FLAGS)
    monkeypatch.setattr(registry, "_load", lambda: reg)
    columns = {m.column for m in reg.metrics()}
    assert {f"{SYNTHETIC}_ci_low", f"{SYNTHETIC}_ci_high", f"{SYNTHETIC}_detectable_gap",
            f"{SYNTHETIC}_samples_2pt"} <= columns  # interval and sample-size columns
    assert SYNTHETIC in uncertainty.CI_METRICS and SYNTHETIC in uncertainty.POWER_METRICS
    assert SYNTHETIC in {m.column for m in uncertainty.resampled_metrics()}  # the bootstrap draws it
    assert (SYNTHETIC, "baseline_self_agreement") in section.agreement_pairs()
    test = next(t for t in regression.regression_tests() if t.key == SYNTHETIC)
    assert (test.header, test.kind, test.better, test.metrics) == ("Synthetic Rate", "rate", "higher", (SYNTHETIC,))
    items = baseline_items().assign(success=[1, 0])
    assert regression.outcomes(items, None)[SYNTHETIC]["value"].tolist() == [1.0, 0.0]
    assert ("synthetic_rate", "Synthetic Rate", "rate") in vendor_columns(stress=False, several_models=False)
    assert f"avv_{SYNTHETIC}" in {m.name for m in prometheus.PROM_METRICS}
    assert f"| `avv_{SYNTHETIC}` | gauge |" in prometheus.render_prom_table()
    assert f"| `{SYNTHETIC}` | yes | `baseline_self_agreement` | yes | rate | yes | `avv_{SYNTHETIC}` |" in \
        registry.render_statistics_table()
    assert "TPS and Synthetic Rate (" in _interval_metrics()


def test_without_its_flags_the_synthetic_metric_is_in_no_list(monkeypatch):
    reg = _with_synthetic()
    monkeypatch.setattr(registry, "_load", lambda: reg)
    assert SYNTHETIC in {m.column for m in reg.metrics()}
    assert SYNTHETIC not in uncertainty.CI_METRICS and SYNTHETIC not in uncertainty.POWER_METRICS
    assert SYNTHETIC not in dict(section.agreement_pairs())
    assert SYNTHETIC not in {t.key for t in regression.regression_tests()}
    assert SYNTHETIC not in {c for c, _, _ in vendor_columns(stress=False, several_models=False)}
    assert f"avv_{SYNTHETIC}" not in {m.name for m in prometheus.PROM_METRICS}
    assert f"`{SYNTHETIC}`" not in registry.render_statistics_table()


def test_a_noise_test_needs_its_disagreement_rates(monkeypatch):
    """The one place besides the declaration: the baseline's own disagreement is summed in stats/noise_floor.py, so a
    declared test without rates there fails loudly, naming it."""
    reg = _with_synthetic(interval=True, noise_floor=NoiseFloor("baseline_self_agreement", test="noise_p",
                                                                what="synthetic disagreement"))
    monkeypatch.setattr(registry, "_load", lambda: reg)
    with pytest.raises(ValueError, match="synthetic_rate declares a noise test.*DISAGREEMENT"):
        uncertainty.noise_tests()


@pytest.mark.parametrize(("flags", "message"), [
    ({"power": True}, "a power estimate needs an interval"),
    ({"noise_floor": NoiseFloor("baseline_self_f1", test="noise_p")}, "a noise test says what"),
    ({"regression": Regression("rate", "success", 0.05), "better": "none"}, "a regression test needs a direction"),
    ({"prometheus": "help", "fmt": "text"}, "a Prometheus gauge needs a number"),
])
def test_a_contradictory_statistics_flag_is_refused_at_declaration(flags, message):
    base = {"column": "x_rate", "header": "X", "fmt": "rate", "better": "higher",
            "ratio": Ratio((("a", 1.0),), (("b", 1.0),))}
    if flags.get("fmt") == "text":
        base.pop("ratio")
    with pytest.raises(RegistryError, match=message):
        Metric(**{**base, **flags})


def test_a_noise_floor_naming_an_unregistered_column_is_refused():
    reg = Registry()
    reg.produces(Metric("y_rate", "Y", "rate", "higher", noise_floor=NoiseFloor("no_such_column")))(
        lambda rows: {"y_rate": 1.0})
    with pytest.raises(RegistryError, match="names unregistered columns: no_such_column"):
        reg.metrics()
