"""pass@k and pass^k over repeats (scoring layer, pure), as gpt-oss's compatibility test reports them
(``compatibility-test/analysis.ts``: per task, pass@k = any success in the first k tries, pass^k = all of the first k
succeed; each the share of tasks).

Here a task is a sample the vendor was sent, a try is a repeat, success is the item's ``status == "success"`` (after
retries, as the success rate), and k is the vendor's number of repeats (its largest repeat number): a repeat missing
for a sample counts as a failed try, as in gpt-oss. With one repeat both equal the success rate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from avv_core.json_types import JSONObject
from avv_scoring.load import is_success
from avv_scoring.metrics.additive import NAN
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.frame_memo import repeat_numbers
from avv_scoring.metrics.registry import produces
from avv_scoring.metrics.row_codes import row_codes


@produces(
    Metric("pass_at_k", "pass@k", "rate", "higher", order=95, group="field",
           doc="samples with at least one successful repeat among the k repeats / samples (gpt-oss's pass@k); "
               "missing without items"),
    Metric("pass_hat_k", "pass^k", "rate", "higher", order=96, group="field",
           doc="samples whose k repeats all succeeded / samples (gpt-oss's pass^k; a missing repeat is a failure)"),
    Metric("pass_k", "k", "int", "none", order=97, group="field",
           doc="k of pass@k and pass^k: the vendor's largest repeat number"),
)
def pass_at_k(rows: pd.DataFrame) -> JSONObject:
    """pass@k and pass^k (module docstring)::

        pass_at_k  = #{samples: any of repeats 1..k succeeded} / #samples
        pass_hat_k = #{samples: all of repeats 1..k succeeded} / #samples
    """
    if rows.empty:
        return {"pass_at_k": NAN, "pass_hat_k": NAN, "pass_k": 0}
    repeat = repeat_numbers(rows).to_numpy()
    k = int(repeat.max())  # every repeat is ≤ k
    sample, names = pd.factorize(rows["sample_id"].astype(str))  # a missing id: -1, no sample
    last = len(repeat) - 1 - np.unique(row_codes(sample, repeat)[::-1], return_index=True)[1]  # an item's last row
    sample, ok = sample[last], is_success(rows).to_numpy(dtype=bool)[last]
    tries_ok = np.bincount(sample[sample >= 0], weights=ok[sample >= 0], minlength=len(names))  # per sample
    samples = len(names)
    return {"pass_at_k": float(int((tries_ok > 0).sum())) / samples,
            "pass_hat_k": float(int((tries_ok == k).sum())) / samples, "pass_k": k}
