"""Replay the sample set against every configured vendor: one Locust User class per vendor.

    locust -f locustfiles/vendors.py --headless                     # the embedded demo
    locust -f locustfiles/vendors.py --headless --avv-config configs/my.yaml --avv-samples my.jsonl

This is the checkout's entry point; it exposes the packaged locustfile (avv_harness/locustfile.py).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout too

from avv_harness.locustfile import *  # noqa: E402,F403  (the User classes and the shape)
