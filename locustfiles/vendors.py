"""Replay the sample set against every configured vendor: one Locust User class per vendor.

    locust -f locustfiles/vendors.py --headless                     # the embedded demo
    locust -f locustfiles/vendors.py --headless --avv-config configs/my.yaml --avv-samples my.jsonl

All logic lives in :mod:`avv_harness.locust_plugin`; this file only exposes the classes Locust collects.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout too

from avv_harness import locust_plugin  # noqa: E402

globals().update(locust_plugin.user_classes())


class AvvShape(locust_plugin.RunShape):
    """Vendors' users all at once; ends when every item is recorded (stress mode: the ladder)."""

    abstract = False
