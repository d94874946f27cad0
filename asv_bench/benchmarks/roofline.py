"""The roofline (issue 41): IMPALA's and Ape-X's measured env frames/s on Pong (learning on) as a fraction of this
machine's limit, cores / (CPU-seconds per frame of env stepping + acting + learning), each part measured alone
(`spacegraph.reports.roofline`, the ``roofline`` scenario of ``spacegraph report`` in its quick form: PyTorch and
TF with oneDNN on, 3-second measured windows). The goals on a 2-core machine: IMPALA >= 0.6, Ape-X >= 0.5.

A smoke run (``SPACEGRAPH_BENCH_QUICK=1``) measures IMPALA only, its parts on PyTorch and our env path only.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from .common import grid, quick, require_module  # noqa: E402


class RooflineFraction:
    """Measured frames/s over the roofline, per agent (both measured in the same benchmark run)."""

    params = (grid(["impala", "apex"], ["impala"]),)
    param_names = ["agent"]
    timeout = 900
    number, repeat = 1, 1

    def setup(self, agent):
        require_module("spacegraph.reports.roofline")

    def track_fraction_of_roofline(self, agent):
        """Measured env frames/s / the limit (the best backend's), one run."""
        from spacegraph.reports import roofline

        smoke = {"variants": ["torch"], "env_paths": ["python"]} if quick() else {}
        result = roofline.measure(quick=True, agents=[agent], **smoke)
        got = roofline.fractions(result).get(agent)
        if got is None:
            raise RuntimeError(f"roofline: no fraction for {agent}: measured {result['measured']}, "
                               f"parts {[v for v, p in result['parts'].items() if 'error' in p]} failed")
        return got["fraction"]

    track_fraction_of_roofline.unit = "ratio"
