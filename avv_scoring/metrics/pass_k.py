"""pass@k and pass^k over repeats (scoring layer, pure), as gpt-oss's compatibility test reports them
(``compatibility-test/analysis.ts``: per task, pass@k = any success in the first k tries, pass^k = all of the first k
succeed; each the share of tasks).

Here a task is a sample the vendor was sent, a try is a repeat, success is the item's ``status == "success"`` (after
retries, as the success rate), and k is the vendor's number of repeats (its largest repeat number): a repeat missing
for a sample counts as a failed try, as in gpt-oss. With one repeat both equal the success rate.
"""

from __future__ import annotations

import pandas as pd

from avv_core.json_types import JSONObject
from avv_scoring.load import is_success
from avv_scoring.metrics.additive import NAN
from avv_scoring.metrics.declaration import Metric
from avv_scoring.metrics.frame_memo import repeat_numbers
from avv_scoring.metrics.registry import produces


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
    repeat = repeat_numbers(rows)
    k = int(repeat.max())
    frame = pd.DataFrame({"sample": rows["sample_id"].astype(str).to_numpy(), "repeat": repeat.to_numpy(),
                          "ok": is_success(rows).to_numpy(dtype=bool)})
    frame = frame[frame["repeat"] <= k].drop_duplicates(["sample", "repeat"], keep="last")
    per_sample = frame.groupby("sample", sort=False)["ok"].agg(["any", "sum"])
    samples = len(per_sample)
    return {"pass_at_k": float(per_sample["any"].sum()) / samples,
            "pass_hat_k": float((per_sample["sum"] == k).sum()) / samples, "pass_k": k}
