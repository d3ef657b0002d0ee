"""Prices and cost (issue 25, point 2): the ``price`` key validated with errors naming the field, the cost formula,
cached tokens from each wire format, the cost metrics on the items every vendor answered, cost as an opt-in IRF input,
and the priced demo (configs/priced-demo.yaml) against the simulator's truth."""

from __future__ import annotations

import pytest

from avv_core.api_outcomes import usage_from_messages, usage_from_responses
from avv_core.errors import InputError
from avv_core.items import truth_tag
from avv_core.pricing import Price
from avv_core.record_file import read_records
from avv_core.records import cached_tokens
from avv_harness.inputs.config import load_config, parse_config
from avv_scoring.score import score_frame
from avv_scoring.testing import records_frame
from tests.builders import baseline_first, vendor_entry, vendors_config
from tests.locust_runs import ROOT, clean_env, run_locust
from tests.sim_records import truth_by_tag


def _config(*prices):
    """Vendors v0 (the baseline), v1, … with these prices (None: no price key), parsed."""
    vendors = [vendor_entry(f"v{i}", **({"price": p} if p is not None else {})) for i, p in enumerate(prices)]
    return parse_config(vendors_config(baseline_first(vendors)), "c.yaml", {})


def test_price_is_read_with_defaults():
    cfg = _config({"input": 0.6, "output": 2.5}, {"input": 1, "output": 3, "cached_input": 0.1, "currency": "USD"},
                  None)
    a, b, c = cfg.vendors
    assert a.price == Price(0.6, 2.5, 0.6, "USD") and b.price == Price(1.0, 3.0, 0.1, "USD") and c.price is None
    assert cfg.currency == "USD" and a.redacted()["price"] == {"input": 0.6, "output": 2.5, "cached_input": 0.6,
                                                               "currency": "USD"}


@pytest.mark.parametrize("price, needle", [
    ({"output": 1}, "m.vendors[0] (v0).price.input: missing"),
    ({"input": -1, "output": 1}, "price.input: must be a finite number ≥ 0"),
    ({"input": "cheap", "output": 1}, "price.input: must be a finite number ≥ 0 (per million tokens), got 'cheap'"),
    ({"input": 1, "output": float("nan")}, "price.output: must be a finite number ≥ 0"),
    ({"input": 1, "output": 1, "currency": "dollars"}, "price.currency: must be a three-letter ISO 4217 code"),
    ({"input": 1, "output": 1, "per": "token"}, "price.per: unknown key (known: input, output, cached_input, "
                                                "currency)"),
    (3, "price: must be a mapping"),
])
def test_bad_prices_name_the_file_and_field(price, needle):
    with pytest.raises(InputError) as err:
        _config(price)
    assert "c.yaml" in str(err.value) and needle in str(err.value)


def test_one_currency_per_config():
    with pytest.raises(InputError, match=r"price.currency: one currency per config, found EUR \(m/v1\), USD \(m/v0\)"):
        _config({"input": 1, "output": 1}, {"input": 1, "output": 1, "currency": "EUR"})


def test_cost_formula_and_cached_tokens():
    price = Price(input=2.0, output=8.0, cached_input=0.5)
    # 1000 prompt tokens of which 400 cached, 100 completion: (600·2 + 400·0.5 + 100·8) / 10⁶
    assert price.cost(1000, 100, 400) == pytest.approx(2.2e-3)
    assert price.cost(1000, 100, None) == pytest.approx(2.8e-3)  # no cache count: every token at the input price
    assert price.cost(None, 100) is None and price.cost(1000, None) is None  # no usage: no cost, never 0
    # each wire format's cache count lands in prompt_tokens_details.cached_tokens
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": 400}}, 1000) == 400
    messages = usage_from_messages({"input_tokens": 600, "cache_read_input_tokens": 400}, {"output_tokens": 100})
    assert messages["prompt_tokens"] == 1000 and cached_tokens(messages, 1000) == 400
    responses = usage_from_responses({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 400},
                                      "output_tokens": 100, "total_tokens": 1100})
    assert cached_tokens(responses, 1000) == 400
    # not believed: more than the prompt, negative, fractional, not a number
    for bad in (1001, -1, 2.5, "400", True):
        assert cached_tokens({"prompt_tokens_details": {"cached_tokens": bad}}, 1000) is None


def _rows():
    """Two vendors, three items; b fails item 3 (so item 3 is not compared), and its failure still cost money."""
    rows = []
    for vendor, costs in (("a", [0.001, 0.003, 0.010]), ("b", [0.002, 0.002, 0.004])):
        for i, cost in enumerate(costs, 1):
            failed = vendor == "b" and i == 3
            rows.append({"vendor": vendor, "sample_id": f"s{i}", "is_baseline": vendor == "a", "cost": cost,
                         "status": "failed" if failed else "success",
                         "error_kind": "truncated" if failed else None})
    return records_frame(rows)


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_cost_per_item_is_compared_on_the_items_every_vendor_answered():
    scores = score_frame(_rows(), None).scores.set_index("vendor")
    assert scores.loc["a", "avg_cost"] == pytest.approx(0.002) and scores.loc["b", "avg_cost"] == pytest.approx(0.002)
    assert scores.loc["a", "cost_rows"] == 2
    # spent: every row, the failed one included
    assert list(scores["cost_spent"]) == pytest.approx([0.014, 0.008])
    unpriced = score_frame(_rows().assign(cost=None), None).scores
    assert unpriced["avg_cost"].isna().all() and unpriced["cost_spent"].isna().all()  # missing, never 0


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_cost_is_an_irf_input_only_when_asked():
    frame = _rows().assign(cost=[0.001, 0.001, 0.001, 0.009, 0.009, 0.009])
    default = score_frame(frame, None)
    assert "avg_cost" not in default.irf_metrics
    with_cost = score_frame(frame, None, irf_metrics=["success_rate", "avg_cost"])
    assert list(with_cost.irf_metrics) == ["success_rate", "avg_cost"] and with_cost.irf_metrics["avg_cost"] is False
    irf = with_cost.scores.set_index("vendor")["irf"]
    assert irf["a"] > irf["b"]  # a is cheaper and never failed


@pytest.mark.integration  # a real Locust run of the priced demo against the simulator: ~8 s
def test_the_priced_demo_costs_what_the_simulator_counted(tmp_path):
    config = ROOT / "configs" / "priced-demo.yaml"
    prices = {v.name: v.price for v in load_config(config, env={}).vendors}
    # the first 12 demo samples (a third of the demo's time): every vendor, calls and plain answers
    demo = (ROOT / "avv_harness" / "data" / "demo.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "some.jsonl").write_text("".join(demo[:12]), encoding="utf-8")
    proc = run_locust(["--headless", "--avv-config", str(config), "--avv-samples", "some.jsonl", "--avv-out", "out",
                       "--avv-run-id", "priced"], cwd=tmp_path, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = tmp_path / "out" / "priced"
    rows = read_records(run_dir / "records.csv").to_dict("records")
    truth = truth_by_tag(run_dir / "sim_truth.jsonl")
    for row in rows:
        told = truth[truth_tag(row)]
        expected = prices[row["vendor"]].cost(told["prompt_tokens"], told["completion_tokens"], 0)
        assert row["cost"] == pytest.approx(expected, abs=1e-9), row["vendor"]
    assert len(rows) == 3 * 12
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "Cost (amounts in USD;" in report and "| Cost / Item | Cost rows | Spent |" in report
    assert "demo-model  cost" in proc.stdout


@pytest.mark.integration  # over a second in one process: the unit tier is sub-second per test
def test_the_cost_section_renders_the_same_table_everywhere_and_only_with_prices():
    from avv_scoring.report.sections.cost import SECTION

    result = score_frame(_rows(), None)
    ((model, part),) = SECTION.parts(result)
    md = "\n".join(SECTION.markdown(part))
    html = SECTION.html([(model, part)], None)
    terminal = "\n".join(SECTION.terminal([(model, part)]))
    for text in (md, html, terminal):
        assert "Cost / Item" in text and "Spent" in text and "0.014" in text and "0.008" in text
    assert "Cost / Task" not in md  # no agent task
    assert SECTION.parts(score_frame(_rows().assign(cost=None), None)) is None


def test_cost_of_agent_tasks_per_completed_task_and_spent_over_every_step():
    from tests.test_trajectory_scoring import TASKS, row_of, scored, trajectory

    def priced(rows):
        return [{**r, "cost": 0.001} for r in rows]

    base = [r for sid in TASKS for r in priced(trajectory("b", sid, [("call", "lookup", {}), ("answer", "done")]))]
    mine = priced(trajectory("v", "T1", [("call", "lookup", {}), ("call", "search", {}), ("answer", "done")])
                  + trajectory("v", "T4", [("call", "lookup", {}), ("fail",)]))
    v = row_of(scored(base + mine), "v")
    assert v["avg_task_cost"] == pytest.approx(0.003)  # T1, the one completed task: 3 steps
    assert v["cost_spent"] == pytest.approx(0.005)  # every step, the failed one included
    assert v["avg_cost"] == pytest.approx(0.001)  # per item: each task's first step, like every per-item metric
