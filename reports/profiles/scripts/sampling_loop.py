"""The loop profiled for reports/profiles/sampling_<config>_<backend>_worker.* (issue 18).

    py-spy record -r 500 -o OUT.svg -- python reports/profiles/scripts/sampling_loop.py torch dqn_cartpole 1 20000 [observe]

A `VectorEnvWorker` acting (explore) on N environments for S env steps, not updating, observing only when
"observe" is given: the work `spacegraph.reports.sampling_contenders.WorkerContender` times.
"""

import sys

from harness.measure.machine import configure_threads
from reference_agents.agents import DQNAgent
from spacegraph.reports import sampling_contenders as sc

backend, config, n, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
configure_threads(1)
cfg = sc.load_config(sc.CONFIG_DIR / f"{config}.yaml")
contender = sc.WorkerContender(DQNAgent(cfg, backend=backend, seed=0), sc.env_factory(cfg), n,
                               observe="observe" in sys.argv[5:], timed=False)
contender.chunk(steps)
contender.close()
