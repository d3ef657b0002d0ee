"""Threshold presets and threshold YAML files (scoring layer, input: reads YAML into a :class:`Thresholds`).

``--thresholds avv|k2vv|k2vv-thinking|minimax|none|FILE.yaml``:

- ``avv`` — the registry defaults (``Thresholds()``);
- ``k2vv`` — K2-Vendor-Verifier's published bound (``avv_scoring/data/k2vv.yaml``: F1 ≥ 80 %);
- ``k2vv-thinking`` — its bound for the thinking model (``avv_scoring/data/k2vv-thinking.yaml``: F1 ≥ 73 %);
- ``minimax`` — MiniMax-Provider-Verifier's published reference thresholds (``avv_scoring/data/minimax.yaml``), on
  the metrics MiniMax defines them on (ToolCalls-Accuracy per response: ``schema_response_accuracy``); its
  Finish-ToolCalls-Rate band holds on MiniMax's own sample set only (``sample_set: minimax``);
- ``none`` — no bound (every vendor passes);
- a YAML file of this form (unknown keys, metrics or bound kinds are errors naming the file and field)::

      name: my-gate             # optional; shown in report.md (default: the file name)
      base: minimax             # optional preset to start from (default: none = no bound)
      thresholds:
        f1: {min: 0.95}                          # one bound
        schema_accuracy: {margin: 0.02}          # non-inferiority: at most 0.02 below the baseline's
        finish_tool_calls_rate: {min: 0.7, max: 0.9}   # a band
        finish_tool_calls_rate: {min: 0.775, max: 0.825, sample_set: minimax}  # judged on marked samples only
        avg_ttft_ms: {max: 800}
        language_following_rate: null            # remove the base's bound

``avv-score thresholds PRESET`` prints a preset in this form, ready to copy and edit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from importlib import resources

import yaml

from avv_core.errors import InputError
from avv_core.json_types import JSONObject
from avv_core.suggest import did_you_mean
from avv_core.yaml_io import load_yaml, loads_yaml
from avv_scoring.metrics.declaration import KINDS
from avv_scoring.metrics.registry import is_metric
from avv_scoring.verdict import DEFAULT_PRESET, Thresholds

#: Presets shipped as YAML in avv_scoring/data (``avv`` and ``none`` are built in).
FILE_PRESETS: tuple[str, ...] = ("k2vv", "k2vv-thinking", "minimax")
PRESETS: tuple[str, ...] = (DEFAULT_PRESET, *FILE_PRESETS, "none")
_TOP_KEYS = frozenset({"name", "base", "thresholds"})


def preset(name: str) -> Thresholds:
    """The named preset; InputError for an unknown name."""
    if name == DEFAULT_PRESET:
        return Thresholds()
    if name == "none":
        return Thresholds.none()
    if name in FILE_PRESETS:
        text = (resources.files(__package__) / "data" / f"{name}.yaml").read_text(encoding="utf-8")
        return thresholds_from_data(loads_yaml(text, f"preset {name}"), f"preset {name}", default_name=name)
    raise InputError(f"--thresholds {name!r}: not a preset ({', '.join(PRESETS)}) nor a .yaml file")


def _number(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        raise InputError(f"{where}: must be a number, got {value!r}")
    return float(value)


def thresholds_from_data(data: object, where: str, default_name: str) -> Thresholds:
    """Thresholds from parsed YAML (the form in the module docstring); InputError naming ``where`` and the
    field for anything else."""
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: expected a mapping with a 'thresholds' key")
    unknown = sorted(set(map(str, data)) - _TOP_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)}{did_you_mean(unknown[0], _TOP_KEYS)} "
                         "(expected name, base, thresholds)")
    base_name = data.get("base", "none")
    if base_name not in PRESETS:
        raise InputError(f"{where}: field 'base': {base_name!r} is not a preset ({', '.join(PRESETS)})")
    raw = data.get("thresholds") or {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: field 'thresholds' must map metric columns to {{min: x, max: y}}")
    bounds: JSONObject = {}
    sets: dict[str, str] = {}
    margins: dict[str, float] = {}
    for column, spec in raw.items():
        field = f"{where}: thresholds.{column}"
        if not isinstance(column, str) or not is_metric(column):
            from avv_scoring.metrics.registry import METRICS  # the registry loads on first use

            raise InputError(f"{field}: not a metric column{did_you_mean(str(column), (m.column for m in METRICS))} "
                             "('avv-score metrics' lists them)")
        if spec is None:
            bounds[column] = None
            continue
        if not isinstance(spec, Mapping) or not spec:
            raise InputError(f"{field}: expected {{min: x}}, {{max: y}}, {{min: x, max: y}} or {{margin: d}}, "
                             f"got {spec!r}")
        kinds = sorted(set(map(str, spec)) - set(KINDS) - {"sample_set", "margin"})
        if kinds:
            raise InputError(f"{field}: unknown bound(s) {', '.join(kinds)} (min, max, margin, sample_set)")
        if "margin" in spec:
            margins[column] = _number(f"{field}.margin", spec["margin"])
            if not any(kind in spec for kind in KINDS):
                bounds[column] = None  # the margin replaces the base's bounds on this metric
                continue
        if "sample_set" in spec:
            if not isinstance(spec["sample_set"], str) or not spec["sample_set"].strip():
                raise InputError(f"{field}.sample_set: must be a sample set name (a string)")
            sets[column] = spec["sample_set"].strip()
            if not any(kind in spec for kind in KINDS):
                raise InputError(f"{field}: sample_set needs a min or a max bound")
        bounds[column] = [(kind, _number(f"{field}.{kind}", spec[kind])) for kind in KINDS if kind in spec]
    base = preset(base_name) if base_name != "none" else Thresholds.none()
    try:
        out = Thresholds.from_mapping({**{c: list(b) for c, b in base.items()}, **bounds}, defaults=False)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    for column in base:
        if column not in bounds:  # the base's sample-set conditions hold for the bounds kept from it
            out = out.for_sample_set(column, base.sample_set_of(column))
    for column, sample_set in sets.items():
        out = out.for_sample_set(column, sample_set)
    for column, margin in base.margins():
        if column not in bounds:
            out = out.with_margin(column, margin)
    for column, margin in margins.items():
        try:
            out = out.with_margin(column, margin)
        except ValueError as exc:
            raise InputError(f"{where}: thresholds.{column}.margin: {exc}") from None
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{where}: field 'name' must be a non-empty string")
    return out.named(name.strip())


def load_thresholds(path: str | os.PathLike[str]) -> Thresholds:
    """Read a thresholds YAML file (module docstring); InputError naming the file and field."""
    path = os.fspath(path)
    return thresholds_from_data(load_yaml(path, "thresholds"), path, default_name=os.path.basename(path))


def resolve_thresholds(spec: str | None) -> Thresholds:
    """``--thresholds``: a preset name or a YAML file (None: the ``avv`` defaults)."""
    if spec is None:
        return Thresholds()
    if spec in PRESETS:
        return preset(spec)
    if spec.endswith((".yaml", ".yml")) or os.path.isfile(spec):
        return load_thresholds(spec)
    return preset(spec)  # raises, naming the presets


def thresholds_yaml(thresholds: Thresholds) -> str:
    """``thresholds`` as a YAML file :func:`load_thresholds` reads back to equal thresholds."""
    return yaml.safe_dump(thresholds.to_yaml_data(), sort_keys=False, allow_unicode=True)
