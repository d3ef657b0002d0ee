"""Which vendor is each model's baseline (scoring layer, pure): the records' ``is_baseline`` flags, or the
``--baseline`` override (a vendor name, or model → vendor). Used by scoring and by the exports, which need the
baseline without scoring.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from avv_core.errors import InputError

BaselineSpec = str | Mapping[str, str] | None


def _normalise_baseline(baseline: BaselineSpec) -> dict[str, str]:
    if baseline is None:
        return {}
    if isinstance(baseline, str):
        return {"*": baseline}
    return {str(k): str(v) for k, v in baseline.items()}


def resolve_baselines(records: pd.DataFrame, baseline: BaselineSpec = None) -> dict[str, str]:
    """The baseline vendor of every model.

    ``baseline`` may be a vendor name (used for every model that has a vendor of that name; other
    models fall back to ``is_baseline``) or a mapping ``{model: vendor}`` (key ``"*"`` = any model).
    Without an override, exactly one vendor of the model must have ``is_baseline`` true. No baseline,
    several, or an override naming no vendor → InputError.
    """
    wanted = _normalise_baseline(baseline)
    vendors: dict[str, list[str]] = {}
    flagged: dict[str, list[str]] = {}
    flags = (
        records["is_baseline"].astype("object").fillna(False).astype(bool)
        if "is_baseline" in records.columns
        else pd.Series(False, index=records.index)
    )
    for (model, vendor), is_base in flags.groupby(
        [records["model"].astype(str), records["vendor"].astype(str)], sort=False
    ):
        vendors.setdefault(model, []).append(vendor)
        if is_base.any():
            flagged.setdefault(model, []).append(vendor)
    for model in wanted:
        if model != "*" and model not in vendors:
            raise InputError(
                f"--baseline {model}={wanted[model]}: no records for model {model!r} "
                f"(models: {', '.join(vendors)})"
            )
    if "*" in wanted and not any(wanted["*"] in vs for vs in vendors.values()):
        raise InputError(
            f"--baseline {wanted['*']}: no model has a vendor of that name "
            f"(vendors: {', '.join(sorted({v for vs in vendors.values() for v in vs}))})"
        )
    out: dict[str, str] = {}
    for model, names in vendors.items():
        if model in wanted:
            if wanted[model] not in names:
                raise InputError(
                    f"--baseline {model}={wanted[model]}: model {model!r} has no vendor of that "
                    f"name (vendors: {', '.join(names)})"
                )
            out[model] = wanted[model]
        elif "*" in wanted and wanted["*"] in names:
            out[model] = wanted["*"]
        else:
            marked = flagged.get(model, [])
            if not marked:
                raise InputError(
                    f"model {model!r}: no baseline vendor (field 'is_baseline' is false for "
                    f"{', '.join(names)}); mark one in the config or pass --baseline NAME"
                )
            if len(marked) > 1:
                raise InputError(
                    f"model {model!r}: several baseline vendors ({', '.join(marked)} have "
                    "'is_baseline' true); pass --baseline NAME to choose one"
                )
            out[model] = marked[0]
    return out


__all__ = ["BaselineSpec", "resolve_baselines"]
