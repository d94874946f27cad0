"""The measuring code of the ``spacegraph report`` scenarios (`spacegraph.report.scenarios`): our agents and
components measured beside hand-written code and RLlib. Nothing here writes a report; the asv benchmarks time the
same code."""


def read_result_json(path: str, flag: str) -> dict:
    """The result JSON a report script is handed (``--rewrite``, ``--from-json``, a kept earlier result).

    Raises:
        SystemExit: naming ``flag`` and the file when it is missing, damaged or holds no JSON object.
    """
    from harness.execution.serialization import BadFileError, read_json

    try:
        return read_json(path, "a report result (a JSON object)")
    except BadFileError as exc:
        raise SystemExit(f"{flag}: {exc}") from None
