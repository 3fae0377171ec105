"""Generate the bundled sample datasets and their schemas (synthetic, CC0).

Run from the repository root::

    python data/make_samples.py

Writes ``data/census.csv`` + ``data/census.schema.json`` (50,000 synthetic people) and
``data/survey.csv`` + ``data/survey.schema.json`` (2,000 synthetic respondents for the
randomized-response demo). Everything is drawn from ``numpy.random.default_rng(SEED)``,
so the files are byte-for-byte reproducible.

The schemas' bounds and category lists are written by hand below as *public knowledge*
(what a data owner would know without looking at the rows); they are never computed
from the generated rows. Some generated values fall outside the declared bounds on
purpose (incomes above the cap), and one declared region ("Overseas") never occurs, so
the demos show clipping and zero-count bins.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20261122
HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------- public knowledge
REGIONS = ["North", "South", "East", "West", "Central", "Overseas"]
EDUCATION = ["none", "primary", "secondary", "vocational", "bachelor", "master", "doctorate"]
SEXES = ["female", "male"]
AGE_GROUPS = ["18-24", "25-34", "35-44", "45-54", "55+"]
SPORTS = ["athletics", "cycling", "swimming", "weightlifting", "football", "other"]

CENSUS_SCHEMA = {
    "version": 1,
    "relation": "add_remove",
    "privacy_unit": {"column": "person_id", "max_rows": 1},
    "public_n": 50000,
    "salt": "census-sample-v1",
    "columns": [
        {"name": "person_id", "kind": "identifier", "missing": {"action": "drop"}},
        {"name": "age", "kind": "numeric", "lower": 18, "upper": 90, "missing": {"action": "drop"}},
        {"name": "sex", "kind": "categorical", "categories": SEXES, "other_bin": False,
         "missing": {"action": "drop"}},
        {"name": "region", "kind": "categorical", "categories": REGIONS, "other_bin": False,
         "missing": {"action": "drop"}},
        {"name": "education", "kind": "categorical", "categories": EDUCATION, "other_bin": False,
         "missing": {"action": "drop"}},
        {"name": "income", "kind": "numeric", "lower": 0, "upper": 250000,
         "missing": {"action": "drop"}},
        {"name": "hours_worked", "kind": "numeric", "lower": 0, "upper": 80,
         "missing": {"action": "replace", "value": 0}},
        {"name": "smoker", "kind": "boolean", "missing": {"action": "drop"}},
    ],
}

SURVEY_SCHEMA = {
    "version": 1,
    "relation": "substitute",
    "privacy_unit": {"column": None, "max_rows": 1},
    "public_n": 2000,
    "salt": "",
    "columns": [
        {"name": "respondent_id", "kind": "identifier", "missing": {"action": "drop"}},
        {"name": "age_group", "kind": "categorical", "categories": AGE_GROUPS,
         "other_bin": False, "missing": {"action": "drop"}},
        {"name": "sex", "kind": "categorical", "categories": SEXES, "other_bin": False,
         "missing": {"action": "drop"}},
        {"name": "sport", "kind": "categorical", "categories": SPORTS, "other_bin": False,
         "missing": {"action": "drop"}},
        {"name": "training_hours", "kind": "numeric", "lower": 0, "upper": 40,
         "missing": {"action": "drop"}},
        {"name": "used_doping", "kind": "boolean", "missing": {"action": "drop"}},
    ],
}


def _blank(rng: np.random.Generator, s: pd.Series, rate: float) -> pd.Series:
    """Make a fraction ``rate`` of cells missing (written as empty cells)."""
    mask = rng.random(len(s)) < rate
    return s.astype(object).where(~mask, None)


def make_census(rng: np.random.Generator, n: int = 50_000) -> pd.DataFrame:
    """Census-like people: age, sex, region, education, income, hours, smoker."""
    person_id = rng.permutation(np.arange(100_001, 100_001 + n))
    age = np.round(18 + rng.beta(1.6, 2.4, n) * 74).astype(int)
    sex = rng.choice(SEXES, n, p=[0.51, 0.49])
    region = rng.choice(REGIONS[:5], n, p=[0.22, 0.25, 0.18, 0.20, 0.15])
    # Education: younger cohorts more educated (index shifts by birth cohort).
    base = rng.choice(len(EDUCATION), n, p=[0.03, 0.10, 0.34, 0.20, 0.20, 0.10, 0.03])
    shift = np.where(age < 35, rng.random(n) < 0.25, 0) - np.where(age > 65, rng.random(n) < 0.3, 0)
    edu_idx = np.clip(base + shift, 0, len(EDUCATION) - 1)
    education = np.array(EDUCATION)[edu_idx]
    # Work: retirement after ~65, some non-participation at every age.
    p_work = np.where(age < 25, 0.65, np.where(age < 60, 0.82, np.where(age < 67, 0.55, 0.08)))
    works = rng.random(n) < p_work
    hours = np.where(
        works,
        np.clip(np.round(rng.normal(38 - 6 * (sex == "female"), 9, n)), 4, 84),
        0,
    )
    # Income: log-normal in education, experience (quadratic in age), hours and sex.
    log_mu = (
        9.6
        + 0.16 * edu_idx
        + 0.045 * (age - 18)
        - 0.0006 * (age - 18) ** 2
        + 0.012 * (hours - 38)
        - 0.12 * (sex == "female")
    )
    income = np.exp(rng.normal(log_mu, 0.55, n))
    pension = rng.gamma(2.0, 6000, n) * (age >= 65)
    income = np.where(works, income, pension + rng.gamma(1.2, 1500, n))
    income = np.round(income, -1)
    # Smoking: more common among men, the less educated and middle ages.
    logit = -1.6 + 0.35 * (sex == "male") - 0.18 * (edu_idx - 3) - 0.0004 * (age - 45) ** 2
    smoker = rng.random(n) < 1 / (1 + np.exp(-logit))
    df = pd.DataFrame(
        {
            "person_id": person_id,
            "age": age,
            "sex": sex,
            "region": region,
            "education": education,
            "income": income.astype(np.int64),
            "hours_worked": hours.astype(np.int64),
            "smoker": np.where(smoker, "true", "false"),
        }
    )
    df["income"] = _blank(rng, df["income"], 0.03)  # refused to answer
    df["hours_worked"] = _blank(rng, df["hours_worked"], 0.01)
    df["smoker"] = _blank(rng, df["smoker"], 0.01)
    df["education"] = _blank(rng, df["education"], 0.005)
    return df


def make_survey(rng: np.random.Generator, n: int = 2_000) -> pd.DataFrame:
    """Athletes' survey with a sensitive yes/no trait (doping) for randomized response."""
    age_group = rng.choice(AGE_GROUPS, n, p=[0.30, 0.32, 0.20, 0.12, 0.06])
    sex = rng.choice(SEXES, n, p=[0.45, 0.55])
    sport = rng.choice(SPORTS, n, p=[0.22, 0.15, 0.15, 0.10, 0.28, 0.10])
    hours = np.clip(np.round(rng.gamma(4.0, 3.0, n), 1), 0, 45)
    base = {"athletics": 0.12, "cycling": 0.18, "swimming": 0.08, "weightlifting": 0.25,
            "football": 0.06, "other": 0.07}
    p = np.vectorize(base.__getitem__)(sport) * (1 + 0.02 * (hours - 12))
    doping = rng.random(n) < np.clip(p, 0.01, 0.9)
    return pd.DataFrame(
        {
            "respondent_id": np.arange(1, n + 1),
            "age_group": age_group,
            "sex": sex,
            "sport": sport,
            "training_hours": hours,
            "used_doping": np.where(doping, "yes", "no"),
        }
    )


def main(out_dir: Path = HERE) -> None:
    """Write the four files into ``out_dir``."""
    rng = np.random.default_rng(SEED)
    out_dir.mkdir(parents=True, exist_ok=True)
    census = make_census(rng)
    survey = make_survey(rng)
    census.to_csv(out_dir / "census.csv", index=False, lineterminator="\n")
    survey.to_csv(out_dir / "survey.csv", index=False, lineterminator="\n")
    for name, schema in (("census", CENSUS_SCHEMA), ("survey", SURVEY_SCHEMA)):
        (out_dir / f"{name}.schema.json").write_text(
            json.dumps(schema, indent=2) + "\n", encoding="utf-8"
        )
    print(f"wrote {len(census)} census rows and {len(survey)} survey rows to {out_dir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
