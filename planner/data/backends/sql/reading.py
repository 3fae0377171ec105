"""Cell reading: every declared column's cells as SQL, read exactly as the pandas rules read them.

:class:`CellReader` writes the ``SELECT`` of the *conformed* cells of a source: per
declared column k, ``u{k}`` usable, ``v{k}`` value (clipped number / bin code / key
label), ``m{k}`` missing, ``i{k}`` invalid, ``cl{k}`` clipped, ``d{k}`` dropped by the
missing-value rule; the person's canonical key ``pid``; the digest words of every cell.

Cells are read exactly like :func:`~planner.data.backends.pandas_backend.parse_numbers`
and :func:`~planner.data.backends.cells.canonical_value`. Most text cells take a fast
path that gives the same verdict without the full rules: a number made of digits, '.',
'e' and signs is cast directly (:meth:`~planner.data.backends.sql.dialect.Dialect.number_guard`
excludes what DuckDB's cast reads beyond the number pattern), a category or boolean token
equal to a declared spelling is matched as it is (:meth:`CellReader._fast_strings`), an
integer id that prints back as its own text is that integer. The other cells (blanks, NA
tokens, odd numbers, undeclared values) go through the full rules: pyarrow's NA tokens
become NULL as in the pandas loader, Unicode white space is trimmed, the number pattern is
matched, and categorical, boolean and identifier cells are reduced to a *canonical key*
(``'n'`` + integer digits, ``'f'`` + number, ``'t'`` + text) by the SQL that also keys the
declared categories (:meth:`CellReader._declared_keys`). ``CASE`` evaluates a branch only
on its rows, so those rules cost only where they are needed. Typed cells (Parquet,
DataFrames) skip the text steps. The missing rule is explicit: a dropped cell's value is
left as it is and never read (sums, bins, filters and row keys test ``u{k}`` first).

Every derived value is computed once in a projection layer of its own and then used by
name: written out several times inside a ``CASE`` it would be evaluated several times
per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from planner.data.backends import digest as dg
from planner.data.backends.cells import _BOOL_LOOKUP, NUMERIC_NA_TOKENS, canonical_value
from planner.data.backends.sql.dialect import (
    CSV_NULL_TOKENS,
    INF_SQL,
    INT_PATTERN,
    NUMBER_PATTERN,
    TRIM_PATTERN,
    TWO53,
    TWO53_SQL,
    WHITESPACE,
    Dialect,
    Layer,
    Params,
    TypeClass,
    concat,
)
from planner.data.schema import Column, ColumnKind, MissingAction, Schema


class CellReader:
    """The conformed cells of one source under one schema, as SQL (module docstring).

    Parameters
    ----------
    schema : Schema
        The declaration.
    dialect : Dialect
        The engine's spellings.
    types : dict
        Each declared column's engine type class (:func:`~planner.data.backends.sql.dialect.type_class`).
    csv : bool
        Whether the cells are CSV text (pyarrow's NA tokens are then NULL).
    source : str
        The name of the source's view (never a file name).
    run : callable
        Runs one statement; used once, for the canonical keys of the declared categories
        (a statement that reads no data).
    """

    def __init__(self, schema: Schema, dialect: Dialect, types: dict[str, TypeClass], csv: bool, source: str,
                 run: Callable[[str, Params], list[tuple[Any, ...]]]) -> None:
        self.schema = schema
        self.dialect = dialect
        self.types = types
        self.csv = csv
        self.source = source
        self.cat_keys = self._declared_keys(run)

    def _declared_keys(self, run: Callable[[str, Params], list[tuple[Any, ...]]]) -> dict[int, list[str | None]]:
        """Per categorical column, the canonical key of each declared category, computed
        by the engine with the same SQL as the cells' keys (one small statement, no data).
        """
        p = Params(self.dialect)
        exprs: list[str] = []
        owners: list[int] = []
        for k, col in enumerate(self.schema.columns):
            if col.kind is ColumnKind.CATEGORICAL:
                for c in col.categories or ():
                    exprs.append(self._canon(p(str(c).strip(WHITESPACE)), "text", p))
                    owners.append(k)
        out: dict[int, list[str | None]] = {}
        if not exprs:
            return out
        row = run(f"SELECT {', '.join(exprs)}", p)[0]
        for k, key in zip(owners, row, strict=True):
            out.setdefault(k, []).append(None if key is None else str(key))
        return out

    def _canon(self, a: str, tc: TypeClass, p: Params) -> str:
        """The canonical key of a cell (NULL when missing) — see the module docstring."""
        d = self.dialect
        if tc == "int":
            return f"CASE WHEN {a} IS NULL THEN NULL ELSE 'n' || CAST({a} AS {d.text_type}) END"
        if tc == "bool":
            return f"CASE WHEN {a} IS NULL THEN NULL WHEN {a} THEN 'tTrue' ELSE 'tFalse' END"
        if tc == "float":
            return self._num_canon(f"CAST({a} AS DOUBLE)", p)
        digits = d.strip(a, p.const(r"^[+-]?0*"))
        return (
            f"CASE WHEN {a} IS NULL OR {a} = '' THEN NULL "
            f"WHEN instr({p.const('+-.0123456789iInN')}, left({a}, 1)) = 0 THEN 't' || {a} "
            f"WHEN {d.matches(a, p.const('^(?:0|[1-9][0-9]*)$'))} THEN 'n' || {a} "
            f"WHEN {d.matches(a, p.const(INT_PATTERN))} THEN 'n' || CASE WHEN {digits} = '' THEN '0' "
            f"WHEN {a} LIKE '-%' THEN '-' || {digits} ELSE {digits} END "
            f"WHEN {d.matches(a, p.const(NUMBER_PATTERN))} THEN "
            f"{self._num_canon(f'TRY_CAST({a} AS DOUBLE)', p)} "
            f"ELSE 't' || {a} END"
        )

    def _text(self, raw: str, tc: TypeClass, p: Params) -> str:
        """A text cell trimmed of Unicode white space; CSV NA tokens (and NULL) → NULL."""
        d = self.dialect
        if tc == "other":
            raw = f"CAST({raw} AS {d.text_type})"
        ws = p.const(WHITESPACE)
        trimmed = (
            f"CASE WHEN instr({ws}, left({raw}, 1)) > 0 OR instr({ws}, right({raw}, 1)) > 0 "
            f"THEN {d.strip(raw, p.const(TRIM_PATTERN))} ELSE {raw} END"
        )
        if self.csv and tc == "text":
            return (f"CASE WHEN {self.dialect.in_list(raw, [p.const(t) for t in CSV_NULL_TOKENS])} THEN NULL "
                    f"ELSE {trimmed} END")
        return trimmed

    def _num_canon(self, x: str, p: Params) -> str:
        d = self.dialect
        return (
            f"CASE WHEN {x} IS NULL OR {d.is_nan(x)} THEN NULL "
            f"WHEN {x} = {INF_SQL} THEN 'ninf' WHEN {x} = -{INF_SQL} THEN 'n-inf' "
            f"WHEN abs({x}) < {p(TWO53)} AND {x} % 1 = 0 "
            f"THEN 'n' || CAST(CAST({x} AS BIGINT) AS {d.text_type}) "
            f"ELSE 'f' || CAST({x} AS {d.text_type}) END"
        )

    def _fast_strings(self, k: int) -> list[tuple[str, int]]:
        """(raw text, code) pairs that stand for a declared value of column k exactly as
        they are: the slow path (trim, NA tokens, canonical key) gives them that code, so
        a cell equal to one skips it (``CASE a WHEN …``: one comparison per cell).
        """
        col = self.schema.columns[k]
        out: list[tuple[str, int]] = []
        if col.kind is ColumnKind.CATEGORICAL:
            for i, (c, key) in enumerate(zip(col.categories or (), self.cat_keys[k], strict=True)):
                s = str(c).strip(WHITESPACE)
                if key is not None and s and not (self.csv and s in CSV_NULL_TOKENS):
                    out.append((s, i))
        else:  # boolean tokens, in the spellings files use
            spellings = {v for t in _BOOL_LOOKUP for v in (t, t.upper(), t.capitalize())}
            for s in sorted(spellings | {"1.0", "0.0"}):
                canon = canonical_value(s)
                code = None if canon is None else _BOOL_LOOKUP.get(canon.lower())
                if code is not None and not (self.csv and s in CSV_NULL_TOKENS):
                    out.append((s, code))
        return out

    def word(self, u: int) -> str:
        """A constant word as a BIGINT literal (two's complement)."""
        signed = u - (1 << 64) if u >= 1 << 63 else u
        return f"CAST({signed} AS BIGINT)"

    def key_word(self, key: str) -> str:
        """The digest word of a canonical key (``'n'`` integer / ``'f'`` number / ``'t'``
        text; NULL: missing): :func:`planner.data.backends.digest.text_word` in SQL."""
        d = self.dialect
        rest = f"substr({key}, 2)"
        flt = self.word(dg.T_FLT)
        return (
            f"CASE WHEN {key} IS NULL THEN {self.word(dg.T_MISS)} "
            f"WHEN {key} = 'ninf' THEN {d.xor(d.word_bits(INF_SQL), flt)} "
            f"WHEN {key} = 'n-inf' THEN {d.xor(d.word_bits(f'-{INF_SQL}'), flt)} "
            f"WHEN substr({key}, 1, 1) = 'n' THEN COALESCE("
            f"{d.xor(f'TRY_CAST({rest} AS BIGINT)', self.word(dg.T_INT))}, "
            f"{d.xor(d.word_md5(rest), self.word(dg.T_TXT))}) "
            f"WHEN substr({key}, 1, 1) = 'f' THEN {d.xor(d.word_bits(f'CAST({rest} AS DOUBLE)'), flt)} "
            f"ELSE {d.xor(d.word_md5(rest), self.word(dg.T_TXT))} END"
        )

    def number_word(self, x: str) -> str:
        """Word of a number x (DOUBLE, not NaN) in a categorical / identifier column:
        :func:`planner.data.backends.digest.number_words`."""
        d = self.dialect
        return (
            f"CASE WHEN abs({x}) < {TWO53_SQL} AND {x} = {d.floor(x)} "
            f"THEN {d.xor(f'CAST({x} AS BIGINT)', self.word(dg.T_INT))} "
            f"ELSE {d.xor(d.word_bits(x), self.word(dg.T_FLT))} END"
        )

    def cells_sql(self, p: Params, columns: Sequence[int] | None = None, *, pid: bool = True,
                   unit_int: bool = False, atoms: bool = False) -> str:
        """SELECT of the conformed cells over the source.

        Per column k: ``u`` usable, ``v`` value (clipped number / bin code), ``m`` missing,
        ``i`` invalid, ``cl`` clipped, ``d`` dropped by the missing-value rule; with
        ``pid`` the person's canonical key; with ``unit_int`` ``iv``, the person id as an
        integer where it is one in plain form (NULL otherwise); with ``atoms`` the digest
        words of every declared column (:mod:`planner.data.backends.digest`): ``wv{k}`` and
        ``wt{k}`` for a numeric one, ``w{k}`` for the others.

        Text cells take a fast path where the engine can read them exactly as the
        pandas rules do without them: a number made of digits, '.', 'e' and signs cast
        directly (:meth:`Dialect.number_guard`), a category or boolean token equal to a
        declared spelling (:meth:`_fast_strings`), an integer id of digits. The others
        (blanks, NA tokens, odd numbers, undeclared values) go through the full rules:
        Unicode trimming, the number pattern, canonical keys. Each derived value lives in
        a projection layer of its own and ``CASE`` evaluates a branch only on its rows.
        """
        d = self.dialect
        schema = self.schema
        ks = sorted(set(range(len(schema.columns)) if columns is None or atoms else columns))
        unit = schema.unit.column if (pid or unit_int) else None
        uk = schema.names.index(unit) if unit is not None else None
        if uk is not None and uk not in ks:
            ks.append(uk)
        if not ks:
            return f"SELECT 1 AS one_ FROM {self.source}"
        L = [Layer() for _ in range(9)]  # raw, fast, text, key, derived, state, flags, rule, final
        out: list[str] = []
        for k in ks:
            col = schema.columns[k]
            src = d.ident(col.name)
            tc = self.types[col.name]
            a = f"a{k}"
            if tc == "other":
                L[0].add(a, f"CAST({src} AS {d.text_type})")
                tc = "text"
            else:
                L[0].add(a, src)
            if col.kind is ColumnKind.NUMERIC:
                self._numeric_cells(k, col, tc, p, L, atoms)
            elif col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY):
                self._identifier_cells(k, tc, p, L, atoms, pid=k == uk and pid, iv=k == uk and unit_int,
                                       label=col.kind is ColumnKind.KEY)
            else:
                self._coded_cells(k, col, tc, p, L, atoms)
            out += [f"{x}{k}" for x in ("u", "v", "m", "i", "cl", "d")]
            if atoms:
                out += [f"wv{k}", f"wt{k}"] if col.kind is ColumnKind.NUMERIC else [f"w{k}"]
        if uk is not None and pid:
            out.append("pid")
        if uk is not None and unit_int:
            out.append("iv")
        q = f"SELECT {', '.join(f'{e} AS {n}' for n, e in L[0].cols)} FROM {self.source}"
        for layer in L[1:]:
            if layer.cols:
                cols = ", ".join(f"{e} AS {n}" for n, e in layer.cols)
                q = f"SELECT *, {cols} FROM ({q}) q"
        return f"SELECT {', '.join(out)} FROM ({q}) q"

    def _numeric_cells(self, k: int, col: Column, tc: TypeClass, p: Params,
                       L: list[Layer], atoms: bool) -> None:
        """Layers of a numeric column: the number ``xr`` (NULL if none), ``mi`` missing,
        ``inv`` invalid (text that is no number), then the rule (replace / drop) and
        clipping. ``v`` and ``cl`` are only read where ``u`` holds (sums, bins, predicates
        and row keys all test it first), so a dropped cell's value is left as it is."""
        d = self.dialect
        a = f"a{k}"

        def nan_or_inf(x: str) -> str:
            return f"({d.is_nan(x)} OR abs({x}) = {INF_SQL})"

        invalid: str | None = None
        if tc == "text":
            L[1].add(f"fx{k}", f"CASE WHEN {d.number_guard(a)} THEN TRY_CAST({a} AS DOUBLE) END")
            L[2].add(f"t{k}", f"CASE WHEN fx{k} IS NULL THEN {self._text(a, 'text', p)} END")
            L[3].add(f"isn{k}", f"CASE WHEN fx{k} IS NULL AND t{k} IS NOT NULL THEN "
                                f"{d.matches(f't{k}', p.const(NUMBER_PATTERN))} END")
            L[4].add(f"xs{k}", f"CASE WHEN isn{k} THEN TRY_CAST(t{k} AS DOUBLE) END")
            L[4].add(f"na{k}", f"CASE WHEN fx{k} IS NULL AND t{k} IS NOT NULL AND NOT isn{k} THEN "
                               f"{d.in_list(f'lower(t{k})', [p.const(t) for t in sorted(NUMERIC_NA_TOKENS)])} END")
            L[5].add(f"xr{k}", f"COALESCE(fx{k}, xs{k})")
            L[5].add(f"in{k}", f"COALESCE(fx{k} IS NULL AND t{k} IS NOT NULL AND t{k} <> '' "
                               f"AND NOT isn{k} AND NOT na{k}, FALSE)")
            L[6].add(f"mi{k}", f"CASE WHEN xr{k} IS NULL THEN NOT in{k} ELSE {nan_or_inf(f'xr{k}')} END")
            invalid = d.xor(d.word_md5(f"t{k}"), self.word(dg.T_TXT))
        elif tc == "bool":  # a boolean cell is no number: invalid unless NULL
            L[5].add(f"xr{k}", "CAST(NULL AS DOUBLE)")
            L[5].add(f"in{k}", f"{a} IS NOT NULL")
            L[6].add(f"mi{k}", f"{a} IS NULL")
            invalid = (f"CASE WHEN {a} THEN {self.word(dg.text_word('True'))} "
                       f"ELSE {self.word(dg.text_word('False'))} END")
        elif tc == "int":
            L[5].add(f"xr{k}", f"CAST({a} AS DOUBLE)")
            L[6].add(f"mi{k}", f"{a} IS NULL")
        else:  # float
            L[5].add(f"xr{k}", f"CAST({a} AS DOUBLE)")
            L[6].add(f"mi{k}", f"xr{k} IS NULL OR {nan_or_inf(f'xr{k}')}")
        bad = f"(mi{k} OR in{k})" if invalid is not None else f"mi{k}"
        if atoms:  # the value (0.0 unless a number: NaN is missing) and a tag, 0 for numbers
            if tc == "int":
                L[6].add(f"wv{k}", f"COALESCE(xr{k}, CAST(0 AS DOUBLE))")
                L[6].add(f"wt{k}", f"CASE WHEN {a} IS NULL THEN {self.word(dg.T_MISS)} "
                                   f"ELSE CAST(0 AS BIGINT) END")
            else:
                number = f"(xr{k} IS NOT NULL AND NOT {d.is_nan(f'xr{k}')})"
                tag = (f"WHEN in{k} THEN {invalid} " if invalid is not None else "")
                L[6].add(f"wv{k}", f"CASE WHEN {number} THEN xr{k} ELSE CAST(0 AS DOUBLE) END")
                L[6].add(f"wt{k}", f"CASE WHEN {number} THEN CAST(0 AS BIGINT) {tag}"
                                   f"ELSE {self.word(dg.T_MISS)} END")
        lo, hi = col.bounds
        if col.missing.action is MissingAction.REPLACE:
            rep = p(float(col.missing.value))  # type: ignore[arg-type]
            L[7].add(f"x{k}", f"CASE WHEN {bad} THEN {rep} ELSE xr{k} END")
            L[7].add(f"u{k}", "TRUE")
        else:
            L[7].add(f"x{k}", f"xr{k}")
            L[7].add(f"u{k}", f"NOT {bad}")
        L[7].add(f"m{k}", f"mi{k}")
        L[7].add(f"i{k}", f"in{k}" if invalid is not None else "FALSE")
        plo, phi = p(float(lo)), p(float(hi))
        L[8].add(f"v{k}", f"least(greatest(x{k}, {plo}), {phi})")
        L[8].add(f"cl{k}", f"(u{k} AND (x{k} < {plo} OR x{k} > {phi}))")
        L[8].add(f"d{k}", f"NOT u{k}")

    def _coded_cells(self, k: int, col: Column, tc: TypeClass, p: Params,
                     L: list[Layer], atoms: bool) -> None:
        """Layers of a categorical or boolean column: code ``cr`` (−1 missing, −2
        undeclared / not a token, else the category index or 0 / 1) and digest word ``w``."""
        categorical = col.kind is ColumnKind.CATEGORICAL
        if categorical:
            consts = [self.word(dg.text_word(canonical_value(c) or "")) for c in col.categories or ()]
        else:
            consts = [self.word(v ^ dg.T_BOOL) for v in (0, 1)]
        key, first, known, other = self._coded_read(k, col, tc, p, L, consts)
        if key is not None:
            match = self._coded_match(k, key, categorical, p)
            L[5].add(f"cr{k}", f"CASE {first}WHEN {key} IS NULL THEN -1 {match} ELSE -2 END")
        if atoms:
            if categorical or tc in ("int", "bool"):
                L[6].add(f"w{k}", f"CASE {known}ELSE {other} END")
            else:  # boolean text / float: tokens are 0 / 1, other cells read like categories
                L[6].add(f"w{k}", f"CASE {known}WHEN cr{k} = 1 THEN {consts[1]} "
                                  f"WHEN cr{k} = 0 THEN {consts[0]} ELSE {other} END")
        self._coded_rule(k, col, L)

    def _coded_read(self, k: int, col: Column, tc: TypeClass, p: Params, L: list[Layer],
                    consts: list[str]) -> tuple[str | None, str, str, str]:
        """The reading of a categorical or boolean column's cells by engine type.

        Adds ``cr{k}`` where the type decides the code alone (int, bool); else the cell's
        canonical key ``key{k}``, matched by :meth:`_coded_match`. Returns (the key column
        or None, a ``WHEN`` deciding the code before the key, the ``WHEN`` branches of
        the digest word known without the key, the word of the other cells).
        """
        d = self.dialect
        a = f"a{k}"
        categorical = col.kind is ColumnKind.CATEGORICAL
        keys = self.cat_keys[k] if categorical else []
        miss = self.word(dg.T_MISS)
        if tc == "text":
            fast = self._fast_strings(k)
            whens = " ".join(f"WHEN {p.const(s_)} THEN {c}" for s_, c in fast)
            L[1].add(f"fc{k}", f"CASE WHEN {a} IS NULL THEN -1 ELSE CASE {a} {whens} END END"
                     if whens else f"CASE WHEN {a} IS NULL THEN -1 END")
            L[2].add(f"t{k}", f"CASE WHEN fc{k} IS NULL THEN {self._text(a, 'text', p)} END")
            L[3].add(f"key{k}", f"CASE WHEN fc{k} IS NULL THEN {self._canon(f't{k}', 'text', p)} END")
            # declared values and tokens by their (constant) word, the others by their key
            known = (f"WHEN fc{k} = -1 THEN {miss} WHEN fc{k} IS NOT NULL THEN CASE fc{k} "
                     + " ".join(f"WHEN {i} THEN {c}" for i, c in enumerate(consts)) + " END ")
            return f"key{k}", f"WHEN fc{k} IS NOT NULL THEN fc{k} ", known, self.key_word(f"key{k}")
        if tc == "int":
            known = f"WHEN {a} IS NULL THEN {miss} "
            if categorical:
                ints = [(int(key_[1:]), i) for i, key_ in enumerate(keys)
                        if key_ is not None and key_[:1] == "n" and key_[1:].lstrip("-").isdigit()]
                whens = " ".join(f"WHEN {p(v)} THEN {i}" for v, i in ints)
                code = f"CASE {a} {whens} ELSE -2 END" if ints else "-2"
            else:
                code = f"CASE {a} WHEN 1 THEN 1 WHEN 0 THEN 0 ELSE -2 END"
                known += f"WHEN {a} = 1 THEN {consts[1]} WHEN {a} = 0 THEN {consts[0]} "
            L[5].add(f"cr{k}", f"CASE WHEN {a} IS NULL THEN -1 ELSE {code} END")
            return None, "", known, d.xor(f"CAST({a} AS BIGINT)", self.word(dg.T_INT))
        if tc == "bool":
            w_true, w_false = self.word(dg.text_word("True")), self.word(dg.text_word("False"))
            if categorical:
                whens = " ".join(f"WHEN {a} = {'TRUE' if key_ == 'tTrue' else 'FALSE'} THEN {i}"
                                 for i, key_ in enumerate(keys) if key_ in ("tTrue", "tFalse"))
                L[5].add(f"cr{k}", f"CASE WHEN {a} IS NULL THEN -1 {whens} ELSE -2 END")
            else:
                L[5].add(f"cr{k}", f"CASE WHEN {a} IS NULL THEN -1 WHEN {a} THEN 1 ELSE 0 END")
                w_true, w_false = consts[1], consts[0]
            known = f"WHEN {a} IS NULL THEN {miss} WHEN {a} THEN {w_true} WHEN NOT {a} THEN {w_false} "
            return None, "", known, miss
        # float: the canonical key of every cell (numbers in a categorical column)
        L[3].add(f"key{k}", self._canon(a, "float", p))
        return f"key{k}", "", f"WHEN {a} IS NULL OR {d.is_nan(a)} THEN {miss} ", self.number_word(a)

    def _coded_match(self, k: int, key: str, categorical: bool, p: Params) -> str:
        """``WHEN`` branches giving the code of a canonical key: the declared category's
        index, or 1 / 0 for a boolean token."""
        d = self.dialect
        if categorical:
            return " ".join(f"WHEN {key} = {p(ck)} THEN {i}" for i, ck in enumerate(self.cat_keys[k])
                            if ck is not None)
        t_keys = [("n" if v.isdigit() else "t") + v for v, c in _BOOL_LOOKUP.items() if c == 1]
        f_keys = [("n" if v.isdigit() else "t") + v for v, c in _BOOL_LOOKUP.items() if c == 0]
        return (f"WHEN {d.in_list(f'lower({key})', [p.const(t) for t in t_keys])} THEN 1 "
                f"WHEN {d.in_list(f'lower({key})', [p.const(t) for t in f_keys])} THEN 0")

    def _coded_rule(self, k: int, col: Column, L: list[Layer]) -> None:
        """The missing-value rule of a coded column: value ``x``/``v``, flags ``u``, ``m``,
        ``i``, ``cl``, ``d`` from the code ``cr`` (categories: undeclared → the "other"
        bin, or not usable)."""
        cr = f"cr{k}"
        L[7].add(f"m{k}", f"{cr} = -1")
        L[7].add(f"i{k}", f"{cr} = -2")
        L[7].add(f"cl{k}", "FALSE")
        if col.kind is ColumnKind.CATEGORICAL:
            labels = col.labels
            other_bin = len(labels) - 1 if col.other_bin else -1
            missing_code = (labels.index(str(col.missing.value))
                            if col.missing.action is MissingAction.REPLACE else -1)
            L[6].add(f"x{k}", f"CAST(CASE WHEN {cr} = -2 THEN {other_bin} WHEN {cr} = -1 THEN "
                              f"{missing_code} ELSE {cr} END AS BIGINT)")
            L[7].add(f"u{k}", f"x{k} >= 0")
            L[7].add(f"v{k}", f"x{k}")
            L[7].add(f"d{k}", f"{cr} = -1" if col.missing.action is MissingAction.DROP else "FALSE")
            return
        if col.missing.action is MissingAction.REPLACE:
            rep = 1 if col.missing.value else 0
            L[6].add(f"x{k}", f"CAST(CASE WHEN {cr} < 0 THEN {rep} ELSE {cr} END AS BIGINT)")
            L[6].add(f"ub{k}", "TRUE")
        else:
            L[6].add(f"x{k}", f"CAST(CASE WHEN {cr} < 0 THEN 0 ELSE {cr} END AS BIGINT)")
            L[6].add(f"ub{k}", f"{cr} >= 0")
        L[7].add(f"u{k}", f"ub{k}")
        L[7].add(f"v{k}", f"x{k}")
        L[7].add(f"d{k}", f"NOT ub{k}")

    def _identifier_cells(self, k: int, tc: TypeClass, p: Params, L: list[Layer], atoms: bool,
                          *, pid: bool, iv: bool, label: bool = False) -> None:
        """Layers of an identifier column: present or missing; the canonical key ``pid``
        (bounding), the plain integer ``iv`` (the unit check), the digest word ``w``.

        A key column (``label``) is read the same way, and its value ``v`` is the key's
        label as :func:`planner.data.backends.pandas_backend.key_label` writes it: text trimmed
        as written ("02139" keeps its zero), an integer in digits, a float as a DOUBLE
        (put in canonical form by :meth:`key_counts`)."""
        d = self.dialect
        a = f"a{k}"
        t_int = self.word(dg.T_INT)
        if tc == "text":
            # an integer written in canonical form (its digits print back as the text):
            # DuckDB's cast also reads '0x10', '1_000', '7.5' and ' 7' as integers
            L[1].add(f"ti{k}", f"TRY_CAST({a} AS BIGINT)")
            L[2].add(f"fi{k}", f"CASE WHEN CAST(ti{k} AS {d.text_type}) = {a} THEN ti{k} END")
            L[3].add(f"t{k}", f"CASE WHEN fi{k} IS NULL THEN {self._text(a, 'text', p)} END")
            L[4].add(f"key{k}", f"CASE WHEN fi{k} IS NULL THEN {self._canon(f't{k}', 'text', p)} END")
            present = f"(fi{k} IS NOT NULL OR key{k} IS NOT NULL)"
            shown = f"CASE WHEN fi{k} IS NOT NULL THEN {a} ELSE t{k} END"
            canon = f"CASE WHEN fi{k} IS NOT NULL THEN 'n' || CAST(fi{k} AS {d.text_type}) ELSE key{k} END"
            plain = f"fi{k}"
            word = (f"CASE WHEN fi{k} IS NOT NULL THEN {d.xor(f'fi{k}', t_int)} "
                    f"ELSE {self.key_word(f'key{k}')} END")
        elif tc == "int":  # an integer is its own canonical value: no text per row
            present = f"{a} IS NOT NULL"
            shown = f"CAST({a} AS {d.text_type})"
            canon = self._canon(a, tc, p)
            plain = a
            word = (f"CASE WHEN {a} IS NULL THEN {self.word(dg.T_MISS)} "
                    f"ELSE {d.xor(f'CAST({a} AS BIGINT)', t_int)} END")
        else:
            L[3].add(f"key{k}", self._canon(a, tc, p))
            present = f"key{k} IS NOT NULL"
            shown = f"CAST({a} AS DOUBLE)" if tc == "float" else \
                f"CASE WHEN {a} IS NULL THEN NULL WHEN {a} THEN 'True' ELSE 'False' END"
            canon = f"key{k}"
            plain = "CAST(NULL AS BIGINT)"
            if tc == "float":
                word = (f"CASE WHEN {a} IS NULL OR {d.is_nan(a)} THEN {self.word(dg.T_MISS)} "
                        f"ELSE {self.number_word(a)} END")
            else:
                word = self.key_word(f"key{k}")
        L[5].add(f"ok{k}", present)
        if atoms:
            L[6].add(f"w{k}", word)
        if pid:
            L[6].add("pid", canon)
        if iv:
            L[6].add("iv", plain)
        L[7].add(f"u{k}", f"ok{k}")
        L[7].add(f"v{k}", shown if label else "CAST(0 AS BIGINT)")
        L[7].add(f"m{k}", f"NOT ok{k}")
        L[7].add(f"i{k}", "FALSE")
        L[7].add(f"cl{k}", "FALSE")
        L[7].add(f"d{k}", f"NOT ok{k}")

    def row_key(self, k: int, col: Column) -> list[str]:
        """SQL of :func:`~planner.data.backends.pandas_backend.row_key_parts` for column k.

        Pieces of text to be concatenated (:func:`_concat`): the status, then the body.
        """
        t = self.dialect.text_type
        status = f"CASE WHEN m{k} THEN '1:' WHEN i{k} THEN '2:' WHEN cl{k} THEN '3:' ELSE '0:' END"
        if col.kind is ColumnKind.NUMERIC:
            # parts known at compile time are literals (the same text, less work per row):
            # a usable value lies in [L, U], so ih = 0 when max(|L|, |U|) < 2⁵³, there is
            # no sign when L ≥ 0, and f1 = f2 = 0 when the column is integer-valued
            lo, hi = col.bounds
            _sign, ih, il, f1, f2 = self._parts_sql(f"v{k}")
            exprs: list[str | None] = [ih, il, f1, f2]
            if max(abs(lo), abs(hi)) < TWO53:
                exprs[0] = None
            if self.int_valued(k):
                exprs[2] = exprs[3] = None
            nums: list[str] = [] if lo >= 0 else [f"CASE WHEN v{k} < 0 THEN '-' ELSE '' END"]
            for j, e in enumerate(exprs):
                if j:
                    nums.append("':'")
                nums.append("'0'" if e is None else f"CAST(CAST({e} AS BIGINT) AS {t})")
            body = f"CASE WHEN u{k} THEN {concat(nums)} ELSE 'x' END"
        elif col.kind is ColumnKind.CATEGORICAL:
            body = f"CAST(v{k} AS {t})"
        elif col.kind is ColumnKind.BOOLEAN:
            body = f"CASE WHEN u{k} THEN CAST(v{k} AS {t}) ELSE 'x' END"
        else:
            body = f"CASE WHEN u{k} THEN '1' ELSE '0' END"
        return [status, body]

    def _parts_sql(self, v: str) -> tuple[str, str, str, str, str]:
        """SQL of :func:`~planner.data.backends.pandas_backend.float_parts` (as DOUBLE expressions)."""
        d = self.dialect
        two = "CAST(9007199254740992 AS DOUBLE)"
        a = f"abs({v})"
        i = d.floor(a)
        f = f"({a} - {i})"
        ih = d.floor(f"{i} / {two}")
        il = f"({i} - {ih} * {two})"
        f1 = d.floor(f"{f} * {two}")
        f2 = d.floor(f"(({f} * {two}) - {f1}) * {two}")
        sign = f"(CASE WHEN {v} < 0 THEN -1 ELSE 1 END)"
        return sign, ih, il, f1, f2

    def int_valued(self, k: int) -> bool:
        """Whether every usable clipped value of numeric column k is an integer.

        True when the engine column has an integer type and the bounds (and the
        replacement value, if any) are integers: clipping and replacing keep integers.
        """
        col = self.schema.columns[k]
        if col.kind is not ColumnKind.NUMERIC or self.types[col.name] != "int":
            return False
        vals: list[float] = [float(b) for b in col.bounds]
        if col.missing.action is MissingAction.REPLACE:
            vals.append(float(col.missing.value))  # type: ignore[arg-type]
        return all(v.is_integer() for v in vals)

    def never_flags(self) -> set[str]:
        """Flag columns that are FALSE by construction (counted as 0, not per row)."""
        out: set[str] = set()
        for k, col in enumerate(self.schema.columns):
            if col.kind is not ColumnKind.NUMERIC:
                out.add(f"cl{k}")
            if col.kind in (ColumnKind.IDENTIFIER, ColumnKind.KEY) or (
                col.kind is ColumnKind.NUMERIC and self.types[col.name] in ("int", "float")
            ):
                out.add(f"i{k}")
        return out

    def digest_words(self) -> list[tuple[str, bool]]:
        """(column, is a DOUBLE) of the digest's words: the declared columns by sorted name."""
        out: list[tuple[str, bool]] = []
        for name in sorted(self.schema.names):
            k = self.schema.names.index(name)
            if self.schema.columns[k].kind is ColumnKind.NUMERIC:
                out += [(f"wv{k}", True), (f"wt{k}", False)]
            else:
                out.append((f"w{k}", False))
        return out
