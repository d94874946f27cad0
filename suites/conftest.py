"""Suite-wide pytest configuration: hypothesis profiles, and framework threads under xdist.

Profiles: ``dev`` (default, quick), ``ci`` (derandomized, more examples) and
``thorough``. ``ci`` is loaded whenever the ``CI`` environment variable is set to
something other than empty/"0"/"false"; otherwise ``HYPOTHESIS_PROFILE`` names the
profile; otherwise ``dev``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist workers share the cores: one framework thread each (set before TF/torch are imported).
    for _var in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(_var, "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "dev", max_examples=30, deadline=None, suppress_health_check=_SUPPRESSED
)
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=150,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=_SUPPRESSED
)


def _profile_name() -> str:
    ci = os.environ.get("CI", "").strip().lower()
    if ci not in ("", "0", "false"):
        return "ci"
    return os.environ.get("HYPOTHESIS_PROFILE", "").strip() or "dev"


settings.load_profile(_profile_name())
