"""``--arg-normalise none|default|FILE`` (scoring layer, input: reads the option and its YAML file into an
:class:`~avv_scoring.metrics.normalisers.ArgNormalisation`).

- ``default`` — every normaliser of :data:`~avv_scoring.metrics.normalisers.NORMALISERS` (dates, numbers, booleans,
  case); what ``avv-score`` and the harness's end-of-run scoring use when the option is not given;
- ``none`` — exact values (``args_match`` / ``args_f1`` as before normalisers existed);
- a YAML file (unknown keys, names or a bad pattern are errors naming the file and field)::

      normalisers: [dates, numbers]       # the normalisers to apply (default: all)
      id_keys: '(?:^|_)(?:id|code|iata)$' # optional: the regex a property name matches when it is an ID
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from avv_core.errors import InputError
from avv_core.yaml_io import load_yaml
from avv_scoring.metrics.normalisers import DEFAULT_ID_KEYS, NORMALISER_NAMES, ArgNormalisation

#: The named choices of ``--arg-normalise`` (anything else is a file).
CHOICES: tuple[str, ...] = ("default", "none")
_KEYS = frozenset({"normalisers", "id_keys"})


def normalisation_from_data(data: object, where: str) -> ArgNormalisation:
    """An :class:`ArgNormalisation` from parsed YAML (the module docstring's form); InputError naming ``where`` and
    the field for anything else."""
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: expected a mapping with 'normalisers' (and optionally 'id_keys')")
    unknown = sorted(set(map(str, data)) - _KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)} (expected normalisers, id_keys)")
    names = data.get("normalisers", list(NORMALISER_NAMES))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(f"{where}: field 'normalisers' must be a list of names ({', '.join(NORMALISER_NAMES)})")
    bad = [n for n in names if n not in NORMALISER_NAMES]
    if bad:
        raise InputError(f"{where}: field 'normalisers': unknown {', '.join(bad)} "
                         f"(known: {', '.join(NORMALISER_NAMES)})")
    id_keys = data.get("id_keys", DEFAULT_ID_KEYS)
    if not isinstance(id_keys, str):
        raise InputError(f"{where}: field 'id_keys' must be a regular expression (a string)")
    try:
        re.compile(id_keys)
    except re.error as exc:
        raise InputError(f"{where}: field 'id_keys': not a regular expression ({exc})") from None
    return ArgNormalisation(tuple(names), id_keys, where)


def resolve_arg_normalise(spec: str | os.PathLike[str] | None) -> ArgNormalisation:
    """``--arg-normalise``: ``default`` (or None), ``none`` or a YAML file."""
    if spec is None or spec == "default":
        return ArgNormalisation()
    if spec == "none":
        return ArgNormalisation.none()
    path = os.fspath(spec)
    if not os.path.isfile(path):
        raise InputError(f"--arg-normalise {path!r}: not {' or '.join(CHOICES)} nor a YAML file")
    return normalisation_from_data(load_yaml(path, "arg-normalise"), path)


__all__ = ["CHOICES", "normalisation_from_data", "resolve_arg_normalise"]
