"""Builders for the tests' inputs: vendor configs (vendors.yaml), sample lines (samples.jsonl), run folders
(records.csv + run.json, for scoring) and chat request bodies. The shape of each lives here once, so a test
states only what differs from the usual.

    write_inputs(tmp_path, ["a", "b"])                       # vendors.yaml on the fake host + 4 samples
    write_yaml(tmp_path / "vendors.yaml", sim_vendors("m", ["ref", "noisy"], "ref"))   # on the simulator
    write_yaml(tmp_path / "sim.yaml", sim_config({"ref": FAST, "noisy": NOISY}))       # its profiles
    parse_config(vendors_config(baseline_first([vendor_entry("a"), vendor_entry("b", adapter="kimi")])), "c.yaml", {})
    write_run(tmp_path / "run", rows, samples)                # a run folder to score
    chat_body("question 3", TOOLS, stream=True, include_usage=True)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

#: The in-process vendor's host (tests/fake_vendor.py answers every URL; no socket is opened).
VENDOR_URL = "http://vendor.test/{name}/v1"
#: A loopback URL nothing answers on (port 9, discard): for configs that are parsed and never sent to.
UNREACHABLE_URL = "http://127.0.0.1:9/v1"


# ------------------------------------------------------------------------------------------- files

def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, lines: Iterable[Mapping[str, Any] | str], ensure_ascii: bool = False) -> Path:
    """One JSON value per line (a ``str`` line is written as it is: a broken line on purpose)."""
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=ensure_ascii)) + "\n"
                            for line in lines), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------- vendors

def vendors_config(vendors: Sequence[Mapping[str, Any]], model: str = "m", **model_keys: Any) -> dict[str, Any]:
    """vendors.yaml's content: one model (``model_keys`` are its keys beside ``vendors``) and its vendors."""
    return {model: {**model_keys, "vendors": [dict(v) for v in vendors]}}


def vendor_entry(name: str, url: str = UNREACHABLE_URL, **keys: Any) -> dict[str, Any]:
    """One vendor of vendors.yaml: ``name``, ``url`` and any other ``keys``, in that order."""
    return {"name": name, "url": url, **keys}


def baseline_first(vendors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``vendors`` with the first one marked ``is_baseline: true`` (the others as they are)."""
    return [{**vendors[0], "is_baseline": True}, *(dict(v) for v in vendors[1:])]


def sim_url(profile: str) -> str:
    """The URL of simulator profile ``profile``; ``{sim}`` is the base URL of the simulator the run starts."""
    return "{sim}/" + profile + "/v1"


def sim_vendors(model: str, names: list[str], baseline: str, **per_vendor: Any) -> dict[str, Any]:
    """vendors.yaml for the simulator the run starts (``--avv-sim-config``): vendor ``name`` is the profile of the
    same name; ``per_vendor[name]`` adds or replaces keys."""
    vendors = []
    for name in names:
        vendor = {"name": name, "model_id": model, "url": sim_url(name), "concurrency": 1,
                  "timeout_s": 15, "is_baseline": name == baseline}
        vendor.update(per_vendor.get(name, {}))
        vendors.append(vendor)
    return vendors_config(vendors, model)


def fake_vendors(vendors: list[str] | dict[str, dict], model: str = "m", url: str = VENDOR_URL) -> dict[str, Any]:
    """vendors.yaml for the in-process vendor: the first vendor is the baseline, no key, concurrency 2, 5 s
    timeout; ``vendors`` as a dict adds or replaces keys per vendor."""
    specs = vendors if isinstance(vendors, dict) else {name: {} for name in vendors}
    rows = [{"name": name, "url": url.format(name=name), "is_baseline": i == 0, "require_key": False,
             "concurrency": 2, "timeout_s": 5, **extra} for i, (name, extra) in enumerate(specs.items())]
    return vendors_config(rows, model)


def sim_config(profiles: Mapping[str, Mapping[str, Any]], **keys: Any) -> dict[str, Any]:
    """The simulator's config (sim.yaml, for ``--avv-sim-config``): its ``profiles`` by name, and other top-level
    ``keys`` (``defaults``)."""
    return {"profiles": profiles, **keys}


# ----------------------------------------------------------------------------------------- samples

def numbered_samples(n: int, tools: list[dict] | None = None, content: str = "q{i}",
                     index: str = "s{i}", first: int = 1) -> list[dict[str, Any]]:
    """``n`` sample lines ``s1``…``sn`` (``index`` formatted with ``i``, from ``first``), one user message each
    (``content`` formatted with ``i``)."""
    lines = []
    for i in range(first, first + n):
        line: dict[str, Any] = {"data_index": index.format(i=i),
                                "messages": [{"role": "user", "content": content.format(i=i)}]}
        if tools is not None:
            line["tools"] = tools
        lines.append(line)
    return lines


def write_inputs(work: Path, vendors: list[str] | dict[str, dict], n_samples: int = 4,
                 sample_lines: list[dict] | None = None, model: str = "m",
                 url: str = VENDOR_URL) -> tuple[Path, Path]:
    """vendors.yaml (:func:`fake_vendors`) and samples.jsonl (``sample_lines``, or ``n_samples`` lines of
    :func:`numbered_samples`)."""
    config = write_yaml(work / "vendors.yaml", fake_vendors(vendors, model, url))
    samples = write_jsonl(work / "samples.jsonl", sample_lines or numbered_samples(n_samples))
    return config, samples


# --------------------------------------------------------------------------------------- run folders

def write_run(folder: Path, rows: Iterable[Mapping[str, Any]], samples: Path | None = None,
              sha: str | None = None, mode: str = "verify", stress: Mapping[str, Any] | None = None) -> Path:
    """A run folder as the harness leaves it: records.csv (each row completed by
    ``avv_scoring.testing.record``) and run.json (``mode``, the ``stress`` plan if given, the samples file with
    its ``sha`` — by default the file's own — if given)."""
    from avv_core.record_file import RecordWriter
    from avv_core.samples import file_sha256
    from avv_scoring.testing import record

    folder.mkdir(parents=True, exist_ok=True)
    writer = RecordWriter(folder / "records.csv")
    for row in rows:
        writer.write(record(run_id=folder.name, **row))
    writer.close()
    run: dict[str, Any] = {"run_id": folder.name, "mode": mode, "vendors": [], "options": {}, "completed": True}
    if stress is not None:
        run["stress"] = stress
    if samples is not None:
        run["samples"] = {"path": str(samples.resolve()), "sha256": sha or file_sha256(str(samples)), "count": 4,
                          "skipped_lines": []}
    (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return folder


# ------------------------------------------------------------------------------------------ bodies

def chat_body(content: str, tools: Sequence[Mapping[str, Any]] | None = None, *, model: str | None = "m",
              stream: bool = False, include_usage: bool = False, **extra: Any) -> dict[str, Any]:
    """A chat-completions request body: ``model`` (None: no model key), one user message, ``tools`` if given,
    ``stream: true`` if ``stream``, ``stream_options.include_usage`` if ``include_usage``; ``extra`` keys last
    (they win). The simulator's decisions hang on the messages and tools only (``avv_sim.request_hash``)."""
    body: dict[str, Any] = {} if model is None else {"model": model}
    body["messages"] = [{"role": "user", "content": content}]
    if tools is not None:
        body["tools"] = list(tools)
    if stream:
        body["stream"] = True
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


def bench_script(name: str) -> Any:
    """A script of bench/ loaded as a module (bench/ is not a package): ``bench_script("import_graph")``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent.parent / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
