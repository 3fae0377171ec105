"""The ledger key of the dataset an AppTest session has active, computed the way the
command line computes it (``planner.data.sources.table_key``: the content digest of the declared
columns), so a test reads the ledger exactly where the app and ``planner release`` write."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from pages._ui import state as S
from planner.data.loader import load_table
from planner.data.schema import Schema
from planner.data.sources import table_key


def ledger_key(at: AppTest) -> str:
    """The active dataset's ledger key (its schema must be declared)."""
    ss = at.session_state
    act = ss[S.ACTIVE]
    fp = ss[S.WORKLOAD_FP]  # the bytes' fingerprint: the session's key for schemas
    if act.get("source") == "upload":
        df = load_table(ss[S.UPLOAD_BYTES], name=ss[S.UPLOAD_NAME] or "upload")
        schema = Schema.from_json(ss[S.SCHEMAS][fp])
    elif act.get("source") == "server":
        from planner.data.sources import resolve_paths

        (path,) = resolve_paths(act["file"])
        df = load_table(path, name=path.name)
        schema = Schema.from_json(ss[S.SCHEMAS][fp])
    else:
        csv, schema_path = S.SAMPLES[act.get("sample") or "census"]
        df = load_table(csv, name=csv.name)
        schema = Schema.load(schema_path)
    return table_key(df, schema)
