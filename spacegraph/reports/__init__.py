"""The measuring code of the ``spacegraph report`` scenarios (`spacegraph.report.scenarios`): our agents and
components measured beside hand-written code and RLlib. Nothing here writes a report; the asv benchmarks time the
same code."""

