"""`spacegraph report`: every report scenario (ours on both backends, RLlib and hand-written peers) in one run,
written as Markdown, one self-contained HTML file, CSV and PNG plots, beside the published baselines.

`registry` holds the scenarios, `runner` runs them and records the machine, `baselines` loads
``reports/baselines/*.yaml``, `writers` writes the report and `cli` adds the ``report`` command.
"""
