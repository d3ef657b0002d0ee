"""The conformance verdict as a metric (scoring layer, pure): the checks a vendor failed in a conformance run
(:mod:`avv_scoring.conformance`), so a failed check — a proven defect — fails the vendor's verdict: the bound
``conformance_failures ≤ 0`` is judged whenever the scored records hold a conformance run's probes (the registry's
``needs="conformance"``), and only then.
"""

from __future__ import annotations

from avv_scoring.metrics.additive import NAN, Columns
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.uncertainty import ModelTable

#: A check's result for a vendor (conformance.csv's ``result``): declared here, below the checks
#: (:mod:`avv_scoring.conformance.checks`) that give them, because this metric counts them.
PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "not_applicable"


@produces(
    Metric("conformance_failures", "Conformance failures", "int", "lower", threshold=("max", 0), order=535,
           needs="conformance",
           doc="conformance checks the vendor failed (conformance.csv); judged only when a conformance run was "
               "scored; missing for a vendor without probes"),
    Metric("conformance_passed", "Conformance passed", "int", "none", order=536,
           doc="conformance checks the vendor passed (the others failed or were not applicable)"),
)
def conformance_failures(model_table: ModelTable) -> dict[str, Columns]:
    """Per vendor of the model: ``conformance_failures`` = checks with result ``fail``, ``conformance_passed`` = with
    ``pass``; both missing for a vendor with no conformance results."""
    table = model_table.conformance
    out: dict[str, Columns] = {}
    for vendor in model_table.scores:
        mine = table[table["vendor"].astype(str) == vendor] if len(table) else table
        if not len(mine):
            out[vendor] = {"conformance_failures": NAN, "conformance_passed": NAN}
            continue
        results = mine["result"].astype(str)
        out[vendor] = {"conformance_failures": int((results == FAIL).sum()),
                       "conformance_passed": int((results == PASS).sum())}
    return out
