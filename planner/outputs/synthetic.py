"""A released synthetic table as files and previews: CSV, the first rows, the released ones.

A ``synthetic_data`` answer (:mod:`planner.planning.statistics.synthetic_data`) holds its
rows as ``answer["records"]``, a list of row objects, and its column order as
``answer["columns"]``. Everything here reads only that released answer: the rows are the
output of a differentially private release, so they may be downloaded and shared like any
released number. (The owner-only comparison with the real table is
:func:`planner.planning.statistics.synthetic_data.compare_marginals`: never an export.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.core.errors import ReleaseError
from planner.core.exports import csv_text

__all__ = ["is_synthetic_table", "synthetic_columns", "synthetic_preview", "synthetic_rows_csv",
           "synthetic_sampler_words", "synthetic_tables"]


def is_synthetic_table(answer: Any) -> bool:
    """Whether a stored answer is a released synthetic table (``records`` and ``columns``).

    Examples
    --------
    >>> is_synthetic_table({"columns": ["a"], "records": [{"a": 1}]}), is_synthetic_table({"value": 3})
    (True, False)
    """
    return (isinstance(answer, Mapping) and isinstance(answer.get("records"), list)
            and isinstance(answer.get("columns"), list))


def synthetic_columns(answer: Any) -> list[str]:
    """The table's columns, in order; :class:`ReleaseError` if ``answer`` is not one."""
    if not is_synthetic_table(answer):
        raise ReleaseError("this answer is not a synthetic table (it has no 'records' and 'columns').")
    return [str(c) for c in answer["columns"]]


def synthetic_sampler_words(answer: Any) -> str:
    """How the table's rows were drawn, in plain words (its ``sampler``; an answer stored
    before the option existed was drawn row by row, independently).

    Examples
    --------
    >>> synthetic_sampler_words({"sampler": "stratified"}).startswith("each of the model's tables")
    True
    >>> synthetic_sampler_words({})
    'each row was drawn independently from the model'
    """
    if isinstance(answer, Mapping) and answer.get("sampler") == "stratified":
        return ("each of the model's tables was drawn with its expected counts rounded to whole rows, dealt to "
                "the rows in a random order")
    return "each row was drawn independently from the model"


def synthetic_rows_csv(answer: Any) -> str:
    """The released synthetic table as CSV text: a header of its columns, one line per row.

    Spreadsheet-safe (:func:`planner.core.exports.csv_text`): a category label starting
    with ``=``, ``+``, ``-`` or ``@`` is written with a leading ``'``.

    Examples
    --------
    >>> print(synthetic_rows_csv({"columns": ["age", "sex"], "records": [{"age": 31.5, "sex": "female"},
    ...                                                                  {"age": 62.0, "sex": "=male"}]}), end="")
    age,sex
    31.5,female
    62.0,'=male
    """
    cols = synthetic_columns(answer)
    rows = ([rec.get(c) for c in cols] for rec in answer["records"] if isinstance(rec, Mapping))
    return csv_text(cols, rows)


def synthetic_preview(answer: Any, rows: int = 10) -> list[dict[str, Any]]:
    """The first ``rows`` synthetic rows, as row objects in column order.

    Examples
    --------
    >>> synthetic_preview({"columns": ["b", "a"], "records": [{"a": 1, "b": 2}, {"a": 3, "b": 4}]}, 1)
    [{'b': 2, 'a': 1}]
    """
    cols = synthetic_columns(answer)
    return [{c: rec.get(c) for c in cols} for rec in answer["records"][: max(int(rows), 0)]
            if isinstance(rec, Mapping)]


def synthetic_tables(answers: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The released synthetic tables among a release's answers, by query id (a query with
    several parts is never one).

    Examples
    --------
    >>> list(synthetic_tables({"n": {"value": 3}, "s": {"columns": ["a"], "records": []}}))
    ['s']
    """
    return {str(qid): ans for qid, ans in answers.items() if is_synthetic_table(ans)}
