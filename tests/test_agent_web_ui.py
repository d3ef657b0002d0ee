"""The Vendors tab on a run with agent tasks, in-process: it adds the trajectory columns, counts tasks (not steps)
as items, and its numbers at the end equal avv-score's on records.csv (trajectory metrics included)."""

from __future__ import annotations

import json
import sys

import pytest

from avv_core.items import ITEM_HEADER, ItemKey
from avv_harness.locust.web_ui import AGENT_COLUMNS, vendor_columns
from avv_scoring.metrics.registry import metric
from tests.builders import write_inputs
from tests.fake_vendor import ScriptedAdapter, stream_reply
from tests.glue import make_env
from tests.test_agent_task import TASK, TOOLS
from tests.test_web_ui import assert_equals_avv_score, start_ui, tab_rows, ui_args, wait_until


def vendor(request):
    """``a`` follows the task (3 calls, then the answer); ``b`` answers at once on every other task."""
    name = request.url.split("/")[3]
    step = ItemKey.tag_step(request.headers[ITEM_HEADER])
    sample = ItemKey.parse_tag(request.headers[ITEM_HEADER])[1].sample_id
    if name == "b" and int(sample[1:]) % 2 == 0:
        return stream_reply("no idea")
    plan = {1: ("get_booking", {"ref": "QX7"}), 2: ("search", {"day": 14}), 3: ("rebook", {"ref": "QX7"})}
    return stream_reply(tool_calls=[plan[step]]) if step in plan else stream_reply("rebooked on LH 906")


@pytest.fixture(autouse=True)
def locust_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["locust"])


@pytest.mark.integration  # an in-process Locust run with the web UI: seconds
def test_the_vendors_tab_shows_trajectory_metrics_of_agent_tasks(tmp_path):
    lines = [{"data_index": f"t{i}", "messages": [{"role": "user", "content": f"rebook {i}"}], "tools": TOOLS,
              "agent": TASK} for i in range(1, 7)]
    config, samples = write_inputs(tmp_path, ["a", "b"], sample_lines=lines)
    env, ctl = make_env(ui_args(tmp_path, config, samples), adapter=ScriptedAdapter(vendor))
    client = start_ui(env, ctl)
    try:
        page = client.get("/").get_data(as_text=True)
        args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        titles = [c["title"] for c in args["extended_tables"][0]["structure"]]
        assert titles == [t for _, t, _ in vendor_columns(False, False, agent=True)]
        assert [metric(c).header for c in AGENT_COLUMNS] == [t for t in titles if t not in
                                                            [t for _, t, _ in vendor_columns(False, False)]]
        assert client.post("/swarm", data={"user_count": 0, "spawn_rate": 0}).get_json()["success"]
        wait_until(lambda: env.runner.state == "stopped" and ctl.run.finished, timeout=60)
        end = client.get("/avv/live.json").get_json()
        assert end["records"] == 6 * 4 + 3 * 4 + 3 * 1  # rows: one per step
        assert_equals_avv_score(end, tmp_path / "end")
        rows = {r["name"]: r for r in tab_rows(client)}
        assert rows["a (baseline)"]["items"] == "6 / 6" and rows["b"]["items"] == "6 / 6"  # tasks, not steps
        assert rows["a (baseline)"]["task_completion_rate"] == "1" and rows["b"]["task_completion_rate"] == "0.5000"
        assert rows["b"]["avg_steps"] == "4" and rows["b"]["steps_delta"] == "0"
    finally:
        env.runner.quit()
