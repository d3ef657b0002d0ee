"""The packaged locustfile: replay the sample set against every configured vendor, one User class per
vendor. ``avv-locust`` runs it by default, so an installed package works from any directory:

    avv-locust --headless                                        # the embedded demo
    avv-locust --headless --avv-config my.yaml --avv-samples my.jsonl

All logic lives in :mod:`avv_harness.locust.plugin` and :mod:`avv_harness.run.controller`; this file only
exposes what Locust collects: the User classes and the run's shape.
"""

from avv_harness.locust import plugin as locust_plugin

# Under keys like "avv:moonshot" (locust_plugin.EXPORT_PREFIX): no vendor name can overwrite a name of this file
globals().update(locust_plugin.locustfile_globals())


class AvvShape(locust_plugin.RunShape):
    """Vendors' users all at once; ends when every item is recorded (stress mode: the ladder)."""

    abstract = False
