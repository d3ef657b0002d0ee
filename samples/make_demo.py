"""Write the embedded demo's sample set, ``avv_harness/data/demo.jsonl`` (400 samples), and check it.

    python samples/make_demo.py            # writes the file
    python samples/make_demo.py --check    # exit 1 when the file differs from what this script writes

The set is ``samples/demo-conversations.jsonl`` — the 32 hand-written agent conversations (samples/README.md) —
followed by 368 short single-turn requests made here from ten templates (weather, currency, orders, calendar, code
search, SQL, paging, a question the tools cannot answer, a request with ``tool_choice: none``, a request without
tools), each with its gold ``expected_tool_call``. ``samples/demo.jsonl`` links to the result. Why 400: the demo
shows verdicts decided at 95 % confidence, and a success rate ≥ 0.99 is shown to hold only after about 380 clean
items (docs/explanation/decision.md); the short requests keep the run well under a minute. Deterministic: the
same script writes the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HAND_WRITTEN = ROOT / "samples" / "demo-conversations.jsonl"
TARGET = ROOT / "avv_harness" / "data" / "demo.jsonl"
TOTAL = 400
SEED = 34

CITIES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Toronto", "Kraków", "Hanoi", "Seville", "Perth", "Tbilisi",
          "Montevideo", "Reykjavík", "Accra", "Bergen", "Porto"]
CURRENCIES = ["EUR", "USD", "GBP", "JPY", "CHF", "NOK", "BRL", "INR", "ZAR", "AUD"]
SERVICES = ["checkout-api", "search-indexer", "payments-gateway", "auth-service", "image-resizer", "billing-worker"]
SYMBOLS = ["apply_discount", "RetryPolicy", "parse_invoice", "CartSession", "normalise_phone", "render_receipt",
           "TokenBucket", "merge_profiles"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
QUESTIONS = ["What does HTTP status 429 mean?", "Thanks, that's all I needed today!",
             "Can you explain what idempotency means for a payments API?", "Which is bigger, a kibibyte or a kilobyte?",
             "Say hello to the team for me.", "What's the difference between a process and a thread?"]


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


WEATHER = _tool("get_weather_forecast", "Daily forecast for a city.", {
    "city": {"type": "string"}, "date": {"type": "string", "format": "date"},
    "units": {"type": "string", "enum": ["metric", "imperial"]}}, ["city", "date"])
CURRENCY = _tool("convert_currency", "Convert an amount at today's rate.", {
    "amount": {"type": "number", "exclusiveMinimum": 0}, "from": {"type": "string", "pattern": "^[A-Z]{3}$"},
    "to": {"type": "string", "pattern": "^[A-Z]{3}$"}}, ["amount", "from", "to"])
ORDER = _tool("get_order", "Look up an order by id.", {
    "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"}}, ["order_id"])
ESCALATE = _tool("escalate_to_human", "Hand the conversation to a human agent.", {
    "reason": {"type": "string", "minLength": 3}, "priority": {"type": "string", "enum": ["low", "normal", "high"]}},
    ["reason"])
EVENTS = _tool("list_calendar_events", "Events between two instants.", {
    "start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"}},
    ["start", "end"])
SEARCH_CODE = _tool("search_code", "Search the repository.", {
    "query": {"type": "string", "minLength": 1}, "path_glob": {"type": "string"},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 100}}, ["query"])
SQL = _tool("run_sql", "Run a read-only SQL query on the analytics warehouse.", {
    "query": {"type": "string", "minLength": 1}, "timeout_s": {"type": "integer", "minimum": 1, "maximum": 300}},
    ["query"])
PAGE = _tool("page_oncall", "Page the on-call engineer.", {
    "service": {"type": "string"}, "severity": {"type": "string", "enum": ["sev1", "sev2", "sev3"]},
    "summary": {"type": "string", "maxLength": 200}}, ["service", "severity", "summary"])


def _body(index: int, system: str, user: str, tools: list[dict[str, Any]] | None, choice: str | None,
          calls: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"data_index": index, "messages": [{"role": "system", "content": system},
                                                              {"role": "user", "content": user}]}
    if tools:
        body["tools"] = tools
        body["tool_choice"] = choice or "auto"
    body.update(temperature=0.6, max_tokens=1024, expected_tool_call=calls)
    return body


def generated(index: int, rng: random.Random) -> dict[str, Any]:
    """One short request (the template follows the index, its details the random stream)."""
    kind = index % 10
    city, day = rng.choice(CITIES), f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == 0:
        return _body(index, "You are a travel assistant.", f"Will it rain in {city} on {day}?", [WEATHER, CURRENCY],
                     None, True)
    if kind == 1:
        a, b = rng.sample(CURRENCIES, 2)
        return _body(index, "You are a travel assistant.", f"How much is {rng.randint(5, 900)} {a} in {b} today?",
                     [CURRENCY, WEATHER], None, True)
    if kind == 2:
        return _body(index, "You are the support assistant of an online shop.",
                     f"Where is my order ORD-{rng.randint(100000, 999999)}? It was due last week.", [ORDER, ESCALATE],
                     None, True)
    if kind == 3:
        return _body(index, "You are an executive assistant with access to the user's calendar.",
                     f"Am I free on {day} between 14:00 and 16:00 (UTC)?", [EVENTS], None, True)
    if kind == 4:
        return _body(index, "You are a coding agent working in the repository at /workspace/shopcart.",
                     f"Where do we define {rng.choice(SYMBOLS)}?", [SEARCH_CODE], None, True)
    if kind == 5:
        return _body(index, "You are a data analyst with read access to the warehouse (table signups: id, "
                     "created_at, country).", f"How many signups did we get in {rng.choice(MONTHS)} 2024?",
                     [SQL], None, True)
    if kind == 6:
        service = rng.choice(SERVICES)
        return _body(index, "You are the SRE assistant. Page only when asked to.",
                     f"{service} returns 503 for every request since 10 minutes: page the on-call now.", [PAGE],
                     "required", True)
    if kind == 7:
        return _body(index, "You are the support assistant of an online shop.", rng.choice(QUESTIONS),
                     [ORDER, ESCALATE], None, False)
    if kind == 8:
        return _body(index, "You are a data analyst. Explain; do not run queries in this conversation.",
                     f"Without running it, what does SELECT country, count(*) FROM signups WHERE created_at >= "
                     f"'{day}' GROUP BY 1 return?", [SQL], "none", False)
    return _body(index, "You are a concise writing assistant.", f"Write one sentence inviting the team to a "
                 f"retrospective in {city} on {day}.", None, None, False)


def lines() -> list[str]:
    """Every line of the demo set, in order (each ends with a newline)."""
    out = HAND_WRITTEN.read_text(encoding="utf-8").splitlines(keepends=True)
    rng = random.Random(SEED)
    for index in range(len(out) + 1, TOTAL + 1):
        out.append(json.dumps(generated(index, rng), ensure_ascii=False) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from what would be written")
    args = parser.parse_args(argv)
    text = "".join(lines())
    if args.check:
        same = TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET}: {'up to date' if same else 'differs: run python samples/make_demo.py'}")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TOTAL} samples to {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
