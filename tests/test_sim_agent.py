"""The simulator's agent behaviour, pure: a request is found as a step of its task from its first messages, the
reference follows the task's recorded path and answers with text matching the gold pattern, and each knob's
deviation (give up, loop, extra step, steps_to_finish) happens exactly when its draw says so."""

from __future__ import annotations

import json
import re

from avv_sim.agent import AgentBook, progress, tool_turns
from avv_sim.decision_key import decision_key
from avv_sim.plan import make_plan
from avv_sim.profiles import make_profile
from avv_sim.sample_file import load_gold
from tests.builders import chat_body

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {
    "type": "object", "properties": {"ref": {"type": "string"}, "day": {"type": "integer"}}, "required": ["ref"]}}}
    for n in ("lookup", "search", "rebook")]
TASK_LINE = {
    "data_index": "t", "messages": [{"role": "system", "content": "agent"}, {"role": "user", "content": "rebook"}],
    "tools": TOOLS, "tool_choice": "auto",
    "agent": {"tool_results": [{"name": "lookup", "arguments": {"ref": "Q"}, "content": "x"},
                               {"name": "search", "arguments": {"ref": "Q", "day": 14}, "content": "y"},
                               {"name": "rebook", "arguments": {"ref": "Q"}, "content": "ok"}],
              "final_text_pattern": "LH 9[0-9]{2}"},
}


def book(tmp_path) -> AgentBook:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(TASK_LINE) + "\n" + json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")
    return load_gold(path).agents


def turn(name: str, args: dict, result: str, call_id: str = "c") -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
        {"role": "tool", "tool_call_id": call_id, "content": result}]


def request(*turns: list[dict]) -> dict:
    history = [m for t in turns for m in t]
    return {"model": "x", "stream": True, "messages": TASK_LINE["messages"] + history, "tools": TOOLS,
            "tool_choice": "auto"}


def plan(profile, body, entry, attempt=1):
    return make_plan(profile, body, attempt, decision_key(body), None, agent=entry)


def calls_of(p) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in p.tool_calls]


def test_a_step_is_found_by_the_tasks_messages_whatever_ids_and_reasoning(tmp_path):
    agents = book(tmp_path)
    assert len(agents) == 1
    body = request(turn("lookup", {"ref": "Q"}, "x", call_id="functions.lookup:0"))
    body["messages"][2]["reasoning_content"] = " "
    entry = agents.find(body)
    assert entry is not None and entry.prefix == 2
    assert agents.find({"messages": [{"role": "user", "content": "rebook"}], "tools": TOOLS}) is None


def test_the_reference_follows_the_recorded_path_then_answers_with_the_gold_text(tmp_path):
    entry = book(tmp_path).find(request())
    ref = make_profile("ref", {})
    history: list[list[dict]] = []
    seen = []
    for _ in range(3):
        p = plan(ref, request(*history), entry)
        assert p.agent["action"] == "call" and p.finish_reason == "tool_calls"
        (name, args), = calls_of(p)
        seen.append((name, args))
        history.append(turn(name, args, "ok"))
    assert seen == [("lookup", {"ref": "Q"}), ("search", {"ref": "Q", "day": 14}), ("rebook", {"ref": "Q"})]
    final = plan(ref, request(*history), entry)
    text = "".join(t.text for t in final.tokens if t.kind == "content")
    assert final.agent == {"action": "answer", "reference_calls": False, "tool_turns": 3, "progress": 3,
                           "steps_to_finish": 3, "after_error": False, "gold_answer": True}
    assert final.finish_reason == "stop" and re.search("LH 9[0-9]{2}", text)


def test_after_an_error_the_reference_retries_and_the_retry_counts_as_progress(tmp_path):
    entry = book(tmp_path).find(request())
    ref, quitter = make_profile("ref", {}), make_profile("quit", {"give_up_on_error_rate": 1.0})
    body = request(turn("lookup", {"ref": "Q"}, "Error: upstream timeout (503)"))
    p = plan(ref, body, entry)
    assert p.agent["action"] == "retry" and p.agent["after_error"] and calls_of(p) == [("lookup", {"ref": "Q"})]
    g = plan(quitter, body, entry)
    assert g.agent["action"] == "give_up" and g.finish_reason == "stop" and not g.agent["gold_answer"]
    after = request(turn("lookup", {"ref": "Q"}, "Error: x"), turn("lookup", {"ref": "Q"}, "fine"))
    assert plan(ref, after, entry).agent["progress"] == 1


def test_loops_and_extra_steps_follow_their_knobs(tmp_path):
    entry = book(tmp_path).find(request())
    looper = make_profile("loop", {"loop_rate": 1.0})
    body = request(turn("lookup", {"ref": "Q"}, "x"))
    p = plan(looper, body, entry)
    assert p.agent["action"] == "loop" and calls_of(p) == [("lookup", {"ref": "Q"})]
    turns = tool_turns((request(turn("lookup", {"ref": "Q"}, "x"), turn("lookup", {"ref": "Q"}, "x")))["messages"][2:])
    assert progress(turns) == 1  # a repeat of the last counted turn is no progress
    done = request(turn("lookup", {"ref": "Q"}, "x"), turn("search", {"ref": "Q", "day": 14}, "y"),
                   turn("rebook", {"ref": "Q"}, "ok"))
    extra = plan(make_profile("extra", {"extra_steps_rate": 1.0}), done, entry)
    assert extra.agent["action"] == "extra" and extra.finish_reason == "tool_calls"
    assert plan(make_profile("short", {"steps_to_finish": 1}), body, entry).agent["action"] == "answer"


def test_draws_are_per_step_and_rates_are_exact_over_many_steps(tmp_path):
    entry = book(tmp_path).find(request())
    profile = make_profile("some", {"loop_rate": 0.3, "seed": 5})
    actions = [plan(profile, request(turn("lookup", {"ref": "Q", "day": d}, "x")), entry).agent["action"]
               for d in range(400)]
    share = actions.count("loop") / len(actions)
    assert 0.24 < share < 0.36 and set(actions) == {"loop", "call"}
    again = [plan(profile, request(turn("lookup", {"ref": "Q", "day": d}, "x")), entry).agent["action"]
             for d in range(400)]
    assert again == actions  # stateless: the same history, the same decision


def test_requests_outside_a_task_are_planned_as_before(tmp_path):
    agents = book(tmp_path)
    body = chat_body("q", TOOLS, model=None)
    assert agents.find(body) is None
    p = make_plan(make_profile("ref", {}), body, 1, decision_key(body))
    assert p.agent is None
    forced = {**request(), "tool_choice": "required"}
    plan = make_plan(make_profile("ref", {}), forced, 1, decision_key(forced), None, agent=agents.find(forced))
    assert plan.agent is None
