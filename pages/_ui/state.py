"""Every session-state key the app uses, in one place, with an idempotent initialiser.

Call :func:`init_state` at the top of ``app.py`` and of every page script: it only sets
keys that are missing, so reruns and deep links never reset the owner's work.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import streamlit as st

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = ROOT / "data"

#: Bundled samples: display name -> (csv path, schema path).
SAMPLES: dict[str, tuple[Path, Path]] = {
    "census": (DATA_DIR / "census.csv", DATA_DIR / "census.schema.json"),
    "survey": (DATA_DIR / "survey.csv", DATA_DIR / "survey.schema.json"),
}

# --- data ---------------------------------------------------------------------------
SOURCE = "data_source"  # "sample", "upload" or "server"
SAMPLE = "data_sample"  # key of SAMPLES
UPLOAD_NAME = "data_upload_name"  # file name of the current upload (or None)
UPLOAD_BYTES = "data_upload_bytes"  # the uploaded bytes (kept for the cached loader)
UPLOAD_SCHEMA = "data_upload_schema"  # schema JSON text declared for the upload (or None)
SERVER_FILE = "data_server_file"  # a file in the allow-listed server directory (planner.sources)
SERVER_SCHEMA = "data_server_schema"  # schema JSON text declared for the server file (or None)
ACTIVE_FP = "data_active_fingerprint"  # fingerprint the workload default was made for

# --- queries ------------------------------------------------------------------------
WORKLOAD = "queries_workload"  # list of dicts (id, kind, column, mechanism, weight, target)
WORKLOAD_BASE = "queries_workload_base"  # the rows the editor started from
EDITOR = "queries_editor"  # data_editor widget key

# --- planner ------------------------------------------------------------------------
EPSILON = "plan_epsilon"
DELTA = "plan_delta"
RULE = "plan_rule"
MODE = "plan_mode"  # "weighted" or "target"
RELATIVE = "plan_relative"  # measure errors relative to a public scale
SHOW_COMPARE = "plan_show_compare"  # compute the same workload under every rule
SHOW_CURVE = "plan_show_curve"  # compute the rules-across-ε comparison (slow under zCDP)

# --- accuracy -----------------------------------------------------------------------
ACC_QUERY = "acc_query"
ACC_EPS = "acc_epsilon"
ACC_DATA_VIEW = "acc_data_dependent"
ACC_SIM = "acc_simulation"  # last Monte Carlo check: {"key": inputs, "rows": [...]} (owner only)

# --- release ------------------------------------------------------------------------
CONFIRM_OPEN = "release_confirm_open"  # the confirm dialog is shown
CONFIRMED = "release_confirmed"  # the owner confirmed (AppTest sets this directly)
LAST_RELEASE_ID = "release_last_id"
LAST_RESULT = "release_last_result"
RELEASE_ERROR = "release_error"

# --- ledger -------------------------------------------------------------------------
LEDGER_DATASET = "ledger_dataset"

RULES = ("basic", "advanced", "rdp", "zcdp")

CENSUS_WORKLOAD: list[dict[str, Any]] = [
    {"id": "people", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1.0, "target": 500.0},
    {"id": "income_total", "kind": "sum", "column": "income", "mechanism": "laplace", "weight": 1.0, "target": 2.0e7},
    {"id": "income_mean", "kind": "mean", "column": "income", "mechanism": "laplace", "weight": 2.0, "target": 1000.0},
    {"id": "age_median", "kind": "median", "column": "age", "mechanism": "exponential", "weight": 1.0, "target": 0.01},
    {"id": "region_counts", "kind": "histogram", "column": "region", "mechanism": "laplace", "weight": 1.0, "target": 500.0},
    {"id": "education_mode", "kind": "mode", "column": "education", "mechanism": "exponential", "weight": 1.0, "target": 500.0},
    {"id": "smoker_share", "kind": "proportion", "column": "smoker", "mechanism": "laplace", "weight": 1.0, "target": 0.01},
]

SURVEY_WORKLOAD: list[dict[str, Any]] = [
    {"id": "respondents", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1.0, "target": 50.0},
    {"id": "doping_share", "kind": "proportion", "column": "used_doping", "mechanism": "randomized_response", "weight": 2.0, "target": 0.1},
    {"id": "sport_counts", "kind": "histogram", "column": "sport", "mechanism": "laplace", "weight": 1.0, "target": 50.0},
    {"id": "hours_mean", "kind": "mean", "column": "training_hours", "mechanism": "laplace", "weight": 1.0, "target": 2.0},
]

GENERIC_WORKLOAD: list[dict[str, Any]] = [
    {"id": "rows", "kind": "count", "column": None, "mechanism": "laplace", "weight": 1.0, "target": None},
]


def default_workload(sample: str | None) -> list[dict[str, Any]]:
    """A sensible starting workload for a bundled sample (a bare count otherwise)."""
    src = {"census": CENSUS_WORKLOAD, "survey": SURVEY_WORKLOAD}.get(sample or "", GENERIC_WORKLOAD)
    return copy.deepcopy(src)


_DEFAULTS: dict[str, Any] = {
    SOURCE: "sample",
    SAMPLE: "census",
    UPLOAD_NAME: None,
    UPLOAD_BYTES: None,
    UPLOAD_SCHEMA: None,
    SERVER_FILE: None,
    SERVER_SCHEMA: None,
    ACTIVE_FP: None,
    EPSILON: 1.0,
    DELTA: 1e-6,
    RULE: "rdp",
    MODE: "weighted",
    RELATIVE: True,
    SHOW_COMPARE: False,
    SHOW_CURVE: False,
    ACC_QUERY: None,
    ACC_EPS: 1.0,
    ACC_DATA_VIEW: False,
    ACC_SIM: None,
    CONFIRM_OPEN: False,
    CONFIRMED: False,
    LAST_RELEASE_ID: None,
    LAST_RESULT: None,
    RELEASE_ERROR: None,
    LEDGER_DATASET: None,
}


def init_state() -> None:
    """Set every missing key to its default (idempotent)."""
    ss = st.session_state
    for key, value in _DEFAULTS.items():
        if key not in ss:
            ss[key] = copy.deepcopy(value)
    if WORKLOAD not in ss:
        ss[WORKLOAD] = default_workload(ss[SAMPLE] if ss[SOURCE] == "sample" else None)
    if WORKLOAD_BASE not in ss:
        ss[WORKLOAD_BASE] = copy.deepcopy(ss[WORKLOAD])


def reset_workload(sample: str | None) -> None:
    """Replace the workload by the default for ``sample`` (when the dataset changes)."""
    ss = st.session_state
    ss[WORKLOAD] = default_workload(sample)
    ss[WORKLOAD_BASE] = copy.deepcopy(ss[WORKLOAD])
    ss.pop(EDITOR, None)
    ss[ACC_QUERY] = None
    ss[LAST_RELEASE_ID] = None
    ss[LAST_RESULT] = None
    ss[RELEASE_ERROR] = None
