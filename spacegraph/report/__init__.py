"""`spacegraph report`: every report scenario (ours on both backends, RLlib and hand-written peers) in one run,
written as Markdown, one self-contained HTML file, CSV and PNG plots, beside the published baselines.

`registry` holds the scenarios (`scenarios` registers them; their measuring code is `spacegraph.reports`),
`runner` runs them and records the machine, `rerender` draws a committed run again without measuring,
`baselines` loads ``reports/baselines/*.yaml``, `writers` writes the report, `headline` the headline figures
table (``reports/headline.md``), and `cli` adds the ``report`` command.
"""
