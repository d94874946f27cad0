"""The loop profiled for reports/profiles/update_dqn_<network>_<backend>_framework.svg (issue 18).

    py-spy record -r 200 -o OUT.svg -- python reports/profiles/scripts/update_loop.py torch nature 80

Builds the agent and the batch as `spacegraph.reports.update_overhead.setup_pair` does (both sides checked
to agree), then runs the framework's update N times.
"""

import sys

from spacegraph.reports.update_overhead import setup_pair

backend, network, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
framework, _ = setup_pair(backend, 32, network=network)
for _ in range(n):
    framework()
