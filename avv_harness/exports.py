"""Exports (harness top layer): a run folder written as K2-Vendor-Verifier / MiniMax-Provider-Verifier files
(``avv-score export --format k2vv RUN``). The requests are rebuilt as they were built — from the sample and run.json's
redacted vendor config, with the wire client's own :func:`~avv_harness.wire.execute.build_body` — so the export lives
with the harness; the file formats are :mod:`avv_scoring.report.k2vv`. The files stay chat-completions shaped: for a
vendor on ``endpoint: messages`` / ``responses`` the ``request`` is the chat body its request was converted from
(:mod:`avv_core.api_formats`). An API key never reaches these files: the
vendor config in run.json is redacted, and no header is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from avv_core.command_line import command_parser
from avv_core.errors import InputError
from avv_core.frame_rows import frame_records
from avv_core.json_types import JSONMapping, JSONObject, JSONValue
from avv_core.samples import Sample
from avv_harness.inputs.config import Vendor
from avv_harness.wire.execute import build_body
from avv_scoring.baseline_choice import BaselineSpec, resolve_baselines
from avv_scoring.cli import PROG, baseline_arg
from avv_scoring.entrypoints import ScoreRequest
from avv_scoring.load import RunInput, read_inputs, resolve_inputs, run_sample_set
from avv_scoring.metrics.trajectories import first_steps
from avv_scoring.report.escape import terminal_text
from avv_scoring.report.k2vv import FORMAT, compare, result_row, summarize

EXPORT_DIR = "k2vv"


def vendor_from_manifest(entry: JSONMapping) -> Vendor:
    """The vendor as run.json records it (keys redacted): enough for :func:`build_body` (model id, usage,
    provider pinning, extra_body)."""
    return Vendor(
        model=str(entry["model"]), name=str(entry["name"]), model_id=str(entry.get("model_id") or entry["model"]),
        url=str(entry.get("url") or ""), include_usage=bool(entry.get("include_usage", True)),
        provider=entry.get("provider"), extra_body=dict(entry.get("extra_body") or {}),
    )


@dataclass
class ExportResult:
    out_dir: str
    files: list[str] = field(default_factory=list)
    summaries: dict[str, JSONObject] = field(default_factory=dict)  # file → summary
    warnings: list[str] = field(default_factory=list)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name) or "_"


def _write_json(path: str, data: JSONValue, lines: bool = False) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        if lines:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in data)
        else:
            json.dump(data, fh, ensure_ascii=False, indent=4)
            fh.write("\n")


def export_run(run: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None,
               samples: str | os.PathLike[str] | None = None, baseline: BaselineSpec = None) -> ExportResult:
    """Write a run folder as K2VV / MiniMax files: per model and vendor ``<vendor>_results.jsonl`` and
    ``<vendor>_summary.json``, and for every other vendor ``<vendor>_compare.json`` against the baseline.

    Default ``out_dir``: ``RUN/k2vv``. With several models each gets a sub-folder; with several repeats each
    repeat gets ``repeat_NN/`` (one K2VV file holds one row per request). InputError for a folder without
    run.json (the vendor config the requests are rebuilt from) or whose sample file changed.
    """
    inputs = resolve_inputs([run])
    item: RunInput = inputs[0]
    if item.run_dir is None or item.manifest is None:
        raise InputError(f"{os.fspath(run)}: export needs a run folder with run.json (the vendor config)")
    result = ExportResult(os.fspath(out_dir) if out_dir is not None else os.path.join(item.run_dir, EXPORT_DIR))
    sample_set = run_sample_set(item, samples, result.warnings)
    by_id = sample_set.by_id()
    vendors = {(str(v.get("model")), str(v.get("name"))): vendor_from_manifest(v) for v in item.manifest.vendors}
    records = first_steps(read_inputs(inputs))  # an agent task's first step: the sample's request as written
    if records.empty:
        raise InputError(f"{item.csv_path}: no records to export")
    try:
        baselines = resolve_baselines(records, baseline)
    except InputError as exc:
        if baseline is not None:
            raise
        baselines = {}  # no baseline vendor in the run: results and summaries only
        result.warnings.append(f"no compare files: {exc}")
    records = records.assign(repeat=pd.to_numeric(records["repeat"], errors="coerce").fillna(1).astype(int))
    models = list(dict.fromkeys(records["model"].astype(str)))
    repeats = sorted(set(records["repeat"].tolist()))
    for model in models:
        for repeat in repeats:
            folder = result.out_dir
            folder = os.path.join(folder, _safe(model)) if len(models) > 1 else folder
            folder = os.path.join(folder, f"repeat_{repeat:02d}") if len(repeats) > 1 else folder
            part = records[(records["model"].astype(str) == model) & (records["repeat"] == repeat)]
            rows_by_vendor = _export_rows(part, model, by_id, vendors, result.warnings)
            base_name = baselines.get(model)
            base_rows = rows_by_vendor.get(base_name) if base_name else None
            for vendor, (rows, attempts) in rows_by_vendor.items():
                stem = os.path.join(folder, _safe(vendor))
                _write_json(f"{stem}_results.jsonl", rows, lines=True)
                summary = summarize(rows, vendors[(model, vendor)].model_id, attempts)
                _write_json(f"{stem}_summary.json", summary)
                result.files += [f"{stem}_results.jsonl", f"{stem}_summary.json"]
                result.summaries[f"{stem}_summary.json"] = summary
                if base_rows is not None and vendor != base_name:
                    _write_json(f"{stem}_compare.json", {"baseline": base_name, "vendor": vendor,
                                                         **compare(base_rows[0], rows)})
                    result.files.append(f"{stem}_compare.json")
    return result


def _export_rows(part: pd.DataFrame, model: str, by_id: Mapping[str, Sample], vendors: Mapping[tuple[str, str], Vendor],
                 warnings: list[str]) -> dict[str, tuple[list[JSONObject], int]]:
    """vendor → (its results rows sorted by data_index, Σ attempts)."""
    out: dict[str, tuple[list[JSONObject], int]] = {}
    for vendor, rows in part.groupby(part["vendor"].astype(str), sort=False):
        if (model, vendor) not in vendors:
            raise InputError(f"run.json: no vendor {model}/{vendor} in field 'vendors' (the records name it)")
        exported, attempts, unknown = [], 0, 0
        for record in frame_records(rows):
            sample = by_id.get(str(record["sample_id"]))
            if sample is None:
                unknown += 1
                continue
            exported.append(result_row(record, sample, build_body(sample, vendors[(model, vendor)])))
            attempts += _attempts(record)
        if unknown:
            warnings.append(f"{model}/{vendor}: {unknown} record(s) whose sample id is not in the sample file "
                            "were not exported")
        out[vendor] = (sorted(exported, key=lambda r: r["data_index"]), attempts)
    return out


def _attempts(record: JSONMapping) -> int:
    value = record.get("attempts")
    return 1 if value is None or pd.isna(value) or not int(value) else int(value)


# ---------------------------------------------------------------------------------------------------- the CLI


def export_parser() -> argparse.ArgumentParser:
    p = command_parser(
        f"{PROG} export",
        "Write a run folder as K2-Vendor-Verifier / MiniMax-Provider-Verifier files: per vendor "
        "<vendor>_results.jsonl, <vendor>_summary.json and <vendor>_compare.json (against the baseline).",
    )
    p.add_argument("run", metavar="RUN", help="a run folder (records.csv and run.json)")
    p.add_argument("--format", default=FORMAT, choices=[FORMAT],
                   help=f"the file format (default {FORMAT}, the only one: K2VV's, which MiniMax reads too)")
    p.add_argument("--out", metavar="DIR", help="output folder (default RUN/k2vv)")
    p.add_argument("--samples", metavar="FILE", help="sample JSONL (default: from run.json)")
    p.add_argument("--baseline", action="append", default=[], metavar="NAME|MODEL=VENDOR",
                   help="baseline vendor of the compare files (default: is_baseline)")
    p.add_argument("-q", "--quiet", action="store_true", help="do not list the files written")
    return p


def main_export(argv: Sequence[str]) -> int:
    """``avv-score export``: write the files, list them, print the warnings."""
    args = export_parser().parse_args(argv)
    request = ScoreRequest((args.run,), baseline=baseline_arg(args.baseline), samples=args.samples, out_dir=args.out)
    result = export_run(request.inputs[0], out_dir=request.out_dir, samples=request.samples, baseline=request.baseline)
    for warning in result.warnings:
        sys.stderr.write(f"{PROG}: warning: {terminal_text(warning)}\n")
    if not args.quiet:
        for path in result.files:
            sys.stdout.write(path + "\n")
        sys.stdout.write(f"wrote {len(result.files)} file(s) to {result.out_dir}\n")
    return 0
