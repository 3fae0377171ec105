"""The query builder: a form generated from each statistic's declaration.

Nothing here knows a statistic by name. For the kind picked, the form offers the columns
its statistic accepts (``column_kinds``), only the mechanisms it declares (``mechanisms``,
with their labels and help; ``not_offered`` says what to use instead), and one widget per
declared option (``options``: :class:`planner.planning.statistics.base.OptionSpec`, drawn by its
type with its label, help and default). Every value is checked as it is typed by the
option's own ``parse`` and then by the query's validation against the schema, and the
engine's message is shown under the field it concerns. A new statistic registered in
:data:`planner.planning.statistics.STATISTICS` appears here with no page code.

The draft lives under a durable key (:data:`pages._ui.state.BUILDER`), so a half-built
query survives a visit to another page.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import streamlit as st

from planner.core.errors import PlannerError, QueryError
from planner.data.schema import ColumnKind, Schema, format_text_list, parse_text_list
from planner.planning.queries import Predicate, PredicateOp, Query, QueryKind
from planner.planning.statistics import STATISTICS
from planner.planning.statistics.base import OptionSpec, OptionType, Statistic
from planner.privacy.budget import SplitMode

from . import fmt
from . import state as S

PREFIX = "qb"
_NUMBER_SPLIT = re.compile(r"[,;\s]+")


def _default_draft() -> dict[str, Any]:
    return {"id": "", "kind": QueryKind.COUNT.value, "column": None, "mechanism": None, "weight": 1.0,
            "target": None, "scale": None, "editing": None, "opts": {}}


def draft() -> dict[str, Any]:
    """The builder's durable draft (created on first use)."""
    ss = st.session_state
    if S.BUILDER not in ss or not isinstance(ss[S.BUILDER], dict):
        ss[S.BUILDER] = _default_draft()
    return dict(ss[S.BUILDER])


def _put(path: tuple[str, ...], value: Any) -> None:
    d = copy.deepcopy(draft())
    node = d
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    st.session_state[S.BUILDER] = d


def _get(path: tuple[str, ...], default: Any = None) -> Any:
    node: Any = draft()
    for k in path:
        if not isinstance(node, dict) or k not in node:
            return default
        node = node[k]
    return node


def _key(path: tuple[str, ...]) -> str:
    return ":".join((PREFIX, *path))


def _stored(path: tuple[str, ...]) -> None:
    _put(path, st.session_state[_key(path)])


def _bind(path: tuple[str, ...], default: Any = None, options: list[Any] | None = None) -> dict[str, Any]:
    """Widget keyword arguments: seeded from the draft, written back on change."""
    value = _get(path, default)
    if options is not None and value not in options:
        value = options[0] if options else None
        _put(path, value)
    st.session_state[_key(path)] = copy.deepcopy(value)
    return {"key": _key(path), "on_change": _stored, "args": (path,)}


# ----------------------------------------------------------------------------- raw values → options
def option_default(o: OptionSpec) -> Any:
    """The raw widget value of an option that was never touched."""
    if o.type is OptionType.BOOL:
        return bool(o.default) if o.default is not None else False
    if o.type is OptionType.CHOICE:
        return o.default if o.default is not None else (o.choices[0] if o.choices else None)
    if o.type is OptionType.FLOATS:
        return ", ".join(f"{v:g}" for v in o.default) if o.default else ""
    if o.type is OptionType.COLUMNS:
        return list(o.default or [])
    if o.type is OptionType.PREDICATE:
        return {"on": False, "column": None, "op": "==", "value": ""}
    return o.default


def raw_from_value(o: OptionSpec, value: Any) -> Any:
    """The raw widget value that shows an option's JSON value (for editing a query)."""
    if value is None:
        return option_default(o)
    if o.type is OptionType.FLOATS:
        return ", ".join(f"{float(v):g}" for v in value)
    if o.type is OptionType.COLUMNS:
        return list(value)
    if o.type is OptionType.PREDICATE:
        p = value if isinstance(value, Predicate) else Predicate.from_dict(value)
        shown = (format_text_list([_const_text(v) for v in p.values]) if p.op is PredicateOp.IN
                 else _const_text(p.values[0]))
        return {"on": True, "column": p.column, "op": p.op.value, "value": shown}
    return value


def _const_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _floats(text: str, o: OptionSpec, where: str) -> list[float] | None:
    parts = [p for p in _NUMBER_SPLIT.split((text or "").strip().strip("[]")) if p]
    if not parts:
        return None
    out = []
    for p in parts:
        try:
            out.append(float(p))
        except ValueError:
            raise QueryError(f"{where}: option {o.name!r} ({o.label}): {p[:30]!r} is not a number; "
                             "type numbers separated by commas, e.g. 0.1, 0.5, 0.9.") from None
    return out


def _constant(text: str, kind: ColumnKind, where: str) -> float | str | bool:
    t = text.strip()
    if kind is ColumnKind.NUMERIC:
        try:
            return float(t)
        except ValueError:
            raise QueryError(f"{where}: the filter's value {t[:30]!r} is not a number; a numeric column is "
                             "compared with a number.") from None
    if kind is ColumnKind.BOOLEAN:
        if t.lower() in ("true", "yes", "1"):
            return True
        if t.lower() in ("false", "no", "0"):
            return False
        raise QueryError(f"{where}: a boolean column is compared with true or false; got {t[:30]!r}.")
    return t


def option_value(o: OptionSpec, raw: Any, schema: Schema, where: str) -> Any:
    """The JSON value of an option from its widget's raw value (None: not given); raises
    QueryError naming the option when the text cannot be read."""
    if o.type is OptionType.FLOATS:
        return _floats(str(raw or ""), o, where)
    if o.type is OptionType.COLUMNS:
        return list(raw) if raw else None
    if o.type is OptionType.PREDICATE:
        if not isinstance(raw, dict) or not raw.get("on"):
            return None
        col = raw.get("column")
        if not col:
            raise QueryError(f"{where}: option {o.name!r} ({o.label}): pick the column the filter compares.")
        try:
            ckind = schema.column(col).kind
        except PlannerError as exc:
            raise QueryError(f"{where}: option {o.name!r} ({o.label}): {exc}") from None
        op = raw.get("op") or "=="
        text = str(raw.get("value") or "")
        if not text.strip():
            raise QueryError(f"{where}: option {o.name!r} ({o.label}): type the value the filter compares with.")
        if op == PredicateOp.IN.value:
            try:
                items = parse_text_list(text)
            except ValueError as exc:
                raise QueryError(f"{where}: option {o.name!r} ({o.label}): the list of values: {exc}") from None
            value: Any = [_constant(t, ckind, where) for t in items]
        else:
            value = _constant(text, ckind, where)
        return {"column": col, "op": op, "value": value}
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    return raw


# ----------------------------------------------------------------------------- widgets
def _help(o: OptionSpec) -> str:
    extra = []
    if o.minimum is not None or o.maximum is not None:
        lo = "" if o.minimum is None else f"{'>' if o.open_bounds else '≥'} {o.minimum:g}"
        hi = "" if o.maximum is None else f"{'<' if o.open_bounds else '≤'} {o.maximum:g}"
        extra.append("allowed: " + " and ".join(x for x in (lo, hi) if x))
    if o.default is not None and o.type not in (OptionType.BOOL, OptionType.CHOICE):
        extra.append(f"default: {option_default(o)}")
    extra.append("required" if o.required else "optional")
    return f"{o.help} ({'; '.join(extra)})"


def _option_widget(o: OptionSpec, kind: str, schema: Schema) -> None:
    path = ("opts", kind, o.name)
    label = o.label + ("" if o.required else " (optional)")
    if o.type is OptionType.BOOL:
        st.checkbox(o.label, help=_help(o), **_bind(path, option_default(o)))
    elif o.type is OptionType.CHOICE:
        st.selectbox(o.label, list(o.choices), help=_help(o), **_bind(path, option_default(o), list(o.choices)))
    elif o.type is OptionType.INT:
        st.number_input(label, value=None, step=1, format="%d", help=_help(o),
                        placeholder=f"default {o.default}" if o.default is not None else
                        ("required" if o.required else f"blank: {o.blank or 'not set'}"), **_bind(path, o.default))
    elif o.type is OptionType.FLOAT:
        st.number_input(label, value=None, format="%g", help=_help(o),
                        placeholder="required" if o.required else
                        (f"default {o.default:g}" if o.default is not None else f"blank: {o.blank or 'not set'}"),
                        **_bind(path, o.default))
    elif o.type is OptionType.FLOATS:
        st.text_input(label, help=_help(o) + " Type numbers separated by commas.",
                      placeholder="e.g. " + _example(o), **_bind(path, option_default(o)))
    elif o.type is OptionType.COLUMNS:
        cols = [c.name for c in schema.columns if c.kind in o.column_kinds]
        chosen = [c for c in (_get(path) or []) if c in cols]
        _put(path, chosen)
        kinds = " or ".join(sorted(k.value for k in o.column_kinds))
        st.multiselect(label, cols, help=_help(o), placeholder=f"pick declared {kinds} columns",
                       **_bind(path, []))
    elif o.type is OptionType.PREDICATE:
        base = {"on": False, "column": None, "op": "==", "value": ""}
        cur = {**base, **(_get(path) or {})}
        _put(path, cur)
        st.checkbox(f"{o.label}: only rows matching a condition", help=_help(o), **_bind((*path, "on"), False))
        if cur["on"]:
            cols = [c.name for c in schema.columns if c.kind not in (ColumnKind.IDENTIFIER, ColumnKind.KEY)]
            f1, f2, f3 = st.columns([2, 1, 2])
            f1.selectbox(f"{o.label}: column", cols, **_bind((*path, "column"), None, cols))
            col = _get((*path, "column"))
            ckind = schema.column(col).kind if col in cols else ColumnKind.NUMERIC
            ops = [p.value for p in PredicateOp] if ckind is ColumnKind.NUMERIC else ["==", "!=", "in"]
            f2.selectbox(f"{o.label}: comparison", ops, **_bind((*path, "op"), "==", ops))
            hint = {ColumnKind.NUMERIC: "a number, e.g. 65", ColumnKind.BOOLEAN: "true or false",
                    ColumnKind.CATEGORICAL: "a declared category"}.get(ckind, "")
            f3.text_input(f"{o.label}: value", placeholder=hint + " (several, comma-separated, for 'in')",
                          **_bind((*path, "value"), ""))
    else:  # pragma: no cover - a new option type needs a widget here
        st.warning(f"Option {o.name!r} has a type this form does not draw yet ({o.type.value}); set it in the "
                   "table's options column as JSON.")


def _example(o: OptionSpec) -> str:
    m = re.search(r"e\.g\. \[([^\]]*)\]", o.help)
    return m.group(1) if m else "1, 2, 3"


# ----------------------------------------------------------------------------- validation
def _columns_for(stat: Statistic, schema: Schema) -> list[str]:
    """The declared columns a statistic accepts ("" for none, when it may have none: a
    selectbox cannot show None as a chosen option)."""
    out = [""] if None in stat.column_kinds else []
    return out + [c.name for c in schema.columns if c.kind in stat.column_kinds]


def build(d: dict[str, Any], schema: Schema, mode: SplitMode) -> tuple[dict[str, Any] | None, dict[str, str], str | None]:
    """(workload row, messages per option name, message about the whole query) of a draft.

    The row is None while something is invalid. Each option is read from its widget and
    checked by its own ``OptionSpec.parse``; the whole query then by
    :class:`planner.planning.queries.Query` and its validation against the schema.
    """
    kind = QueryKind(d["kind"])
    stat = STATISTICS[kind]
    qid = str(d.get("id") or "").strip()
    where = f"query {qid!r}" if qid else "the new query"
    field_errors: dict[str, str] = {}
    opts: dict[str, Any] = {}
    for o in stat.options:
        raw = _get(("opts", kind.value, o.name), option_default(o))
        try:
            value = option_value(o, raw, schema, where)
            if value is None:
                if o.required:
                    raise QueryError(f"{where}: a {kind.value} query needs {o.name!r} ({o.label}).")
                continue
            o.parse(value, where)
        except PlannerError as exc:
            field_errors[o.name] = str(exc)
            continue
        opts[o.name] = value
    if not qid:
        return None, field_errors, "Give the query an id: a short unique name for its answer, e.g. age_quartiles."
    if field_errors:  # each is shown at its field; the whole query is checked once they are fixed
        return None, field_errors, None  # (checked without them, it would blame a missing option)
    weight, target, scale = d.get("weight"), d.get("target"), d.get("scale")
    flat: dict[str, Any] = {"id": qid, "kind": kind.value, "column": d.get("column") or None,
                            "mechanism": d.get("mechanism")}
    if mode is SplitMode.TARGET:
        flat["target"] = target
    else:
        flat["weight"] = weight
    try:
        q = Query.from_dict({**flat, **opts})
        q.validate(schema)
        if scale is not None and not (isinstance(scale, (int, float)) and scale > 0):
            raise QueryError(f"{where}: 'scale' must be a positive number (a public size of the answer).")
        if weight is not None and mode is SplitMode.TARGET:
            Query.from_dict({**flat, "target": None, "weight": weight, **opts})
        if target is not None and mode is not SplitMode.TARGET:
            Query.from_dict({**flat, "weight": None, "target": target, **opts})
    except PlannerError as exc:
        return None, field_errors, str(exc)
    row = S.row_from_query(q, float(scale) if scale is not None else None)
    row["weight"] = float(weight) if weight is not None else None
    row["target"] = float(target) if target is not None else None
    return row, field_errors, None


# ----------------------------------------------------------------------------- actions
def _ids() -> list[str]:
    return [str(r.get("id")) for r in S.clean_rows(st.session_state[S.WORKLOAD]) if r.get("id")]


def _add(schema: Schema, mode: SplitMode) -> None:
    ss = st.session_state
    d = draft()
    row, _errors, problem = build(d, schema, mode)
    ss["qb:result"] = None
    if row is None:
        ss["qb:result"] = {"error": problem or "Fix the options marked above first."}
        return
    editing = d.get("editing")
    rows = [dict(r) for r in ss[S.WORKLOAD]]
    taken = set(_ids()) - ({editing} if editing else set())
    if row["id"] in taken:
        ss["qb:result"] = {"error": f"A query named {row['id']!r} already exists; pick another id."}
        return
    if editing:
        rows = [row if r.get("id") == editing else r for r in rows]
        ss[S.PINS] = {k: v for k, v in ss[S.PINS].items() if k.split(":")[0] != editing}
        ss[S.MANUAL] = {k: v for k, v in ss[S.MANUAL].items() if k.split(":")[0] != editing}
        text = f"Saved the changes to {row['id']}."
    else:
        rows.append(row)
        text = f"Added {row['id']}."
    ss[S.WORKLOAD] = rows
    ss[S.EDITOR_VERSION] += 1
    # the next query starts fresh: a new form, nothing carried over from the one just added
    ss[S.BUILDER] = _default_draft()
    ss["qb:result"] = {"ok": text}


def load(qid: str) -> None:
    """Put an existing query into the builder (its options as the widgets show them)."""
    ss = st.session_state
    rows = S.normal_rows(S.clean_rows(ss[S.WORKLOAD]))
    row = next((r for r in rows if r.get("id") == qid), None)
    if row is None:
        return
    d = draft()
    kind = row.get("kind") if row.get("kind") in [k.value for k in QueryKind] else QueryKind.COUNT.value
    stat = STATISTICS[QueryKind(kind)]
    opts = row.get("options") if isinstance(row.get("options"), dict) else {}
    raw = {}
    for o in stat.options:
        try:
            raw[o.name] = raw_from_value(o, opts.get(o.name))
        except PlannerError:
            raw[o.name] = option_default(o)
    d.update({"id": qid, "kind": kind, "column": row.get("column") or "", "mechanism": row.get("mechanism"),
              "weight": row.get("weight"), "target": row.get("target"), "scale": row.get("scale"),
              "editing": qid})
    d["opts"] = {**d.get("opts", {}), kind: raw}
    ss[S.BUILDER] = d
    ss["qb:result"] = None


def _cancel() -> None:
    _put(("editing",), None)
    _put(("id",), "")
    st.session_state["qb:result"] = None


# ----------------------------------------------------------------------------- the form
def render(schema: Schema, mode: SplitMode) -> None:
    """Draw the builder for the active schema (``mode``: the Planner's mode, which decides
    whether the weight or the target is used)."""
    ss = st.session_state
    d = draft()
    kinds = [k.value for k in STATISTICS]
    editing = d.get("editing")
    if editing:
        st.info(f"Editing **{editing}**: change what you need, then save (or cancel).", icon=":material/edit:")
    k1, k2 = st.columns([1, 2])
    k1.selectbox("kind", kinds, format_func=lambda k: f"{STATISTICS[QueryKind(k)].label} ({k})",
                 help="What the answer is. Each kind offers only the mechanisms and options that are valid for it.",
                 **_bind(("kind",), QueryKind.COUNT.value, kinds))
    kind = str(_get(("kind",)))
    stat = STATISTICS[QueryKind(kind)]
    k2.markdown(f"**{stat.label}**: {stat.summary}")

    c1, c2, c3 = st.columns(3)
    c1.text_input("id", placeholder="e.g. age_quartiles", help="A short unique name for the answer.",
                  **_bind(("id",), ""))
    columns = _columns_for(stat, schema)
    if columns == [""]:  # a statistic that takes no column (a synthetic table names its columns below)
        _put(("column",), "")
        c2.caption(f"**column**: none — {stat.column_hint}.")
    else:
        c2.selectbox("column", columns, format_func=lambda c: c or "(none: every row)",
                     help=f"A {kind} query needs {stat.column_hint}. Only such declared columns are listed.",
                     **_bind(("column",), columns[0] if columns else None, columns))
    mechs = [m.name.value for m in stat.mechanisms]
    labels = {m.name.value: m.label for m in stat.mechanisms}
    c3.selectbox("mechanism", mechs, format_func=lambda m: f"{labels[m]} ({m})",
                 help=" · ".join(f"{m.label}: {m.help}" for m in stat.mechanisms if m.help) or None,
                 **_bind(("mechanism",), mechs[0], mechs))
    if stat.not_offered:
        st.caption("Not offered for this kind: " + " ".join(f"*{m.value}* — {why}" for m, why in stat.not_offered.items()))

    w1, w2, w3 = st.columns(3)
    w1.number_input("weight", value=None, step=1.0, format="%g", placeholder="1",
                    help="Importance when the Planner splits the budget optimally (used in the optimal split).",
                    **_bind(("weight",), 1.0))
    w2.number_input("target ±", value=None, format="%g", placeholder="for target mode",
                    help="The ±error wanted (95%, in the answer's unit; a fraction of the scale when a scale is "
                         "given), used when the Planner meets targets.", **_bind(("target",), None))
    w3.number_input("scale", value=None, format="%g", placeholder="default: a public size",
                    help="Optional: a public size the error is measured against (the optimal split then balances "
                         "relative errors); in target mode the target becomes a fraction of it.",
                    **_bind(("scale",), None))

    row, errors, problem = build(draft(), schema, mode)
    if stat.options:
        st.markdown(f"**Options of a {stat.label.lower()} query** (declared by the statistic)")
        for o in stat.options:
            _option_widget(o, kind, schema)
            if o.name in errors:
                st.error(fmt.plain(errors[o.name]), icon=":material/error:")
        row, errors, problem = build(draft(), schema, mode)
    if problem and not str(draft().get("id") or "").strip():
        st.caption(problem)
    elif problem:
        st.error(fmt.plain(problem), icon=":material/error:")
    b1, b2, _ = st.columns([1, 1, 3])
    if editing:
        b1.button(f"Save changes to {editing}", key="qb:save", type="primary", on_click=_add,
                  args=(schema, mode), disabled=row is None)
        b2.button("Cancel editing", key="qb:cancel", on_click=_cancel)
    else:
        b1.button("Add the query", key="qb:add", type="primary", on_click=_add, args=(schema, mode),
                  disabled=row is None, help=None if row is not None else "Fix the messages above first.")
    res = ss.get("qb:result")
    if res and res.get("error"):
        st.error(fmt.plain(res["error"]))
    elif res and res.get("ok"):
        st.success(res["ok"])
        ss["qb:result"] = None
