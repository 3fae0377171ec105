"""AppTest of the training-budget (DP-SGD) page: it renders standalone, shows the engine's
numbers (the same ``planner.planning.dpsgd`` calls the CLI makes), and a bad input is an error
message, not a traceback."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from planner.planning import dpsgd

PAGE = Path(__file__).resolve().parents[2] / "pages" / "training_page.py"


def _run() -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=60)
    at.run(timeout=60)
    return at


def test_training_page_renders_the_engines_numbers() -> None:
    at = _run()
    assert not at.exception
    assert not at.error
    assert at.title[0].value.startswith("Training budget")
    assert at.get("vega_lite_chart"), "the ε-against-epochs chart"
    run = dpsgd.TrainingRun.from_batch(n=60000, batch=256, epochs=60, sigma=1.1, delta=1e-6)
    expected = dpsgd.training_epsilon(run)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["ε, Rényi DP"] == f"{expected.epsilon['rdp']:.4g}"
    assert metrics["ε, optimal accountant"] == f"{expected.epsilon['pld']:.4g}"
    assert metrics["Steps"] == f"{run.steps:,}"


def test_the_default_delta_respects_the_pages_own_advice() -> None:
    """Issue 29: the defaults broke the page's advice (δ = 1e-5 with N = 60,000 is 0.6 × 1/N)."""
    at = _run()
    advice = " ".join(m.value for m in at.markdown)
    assert "is well below 1/N" in advice and "keep δ well below" not in advice


def test_training_page_bad_input_is_a_message() -> None:
    at = _run()
    at.number_input(key="train_batch_w").set_value(100000).run(timeout=60)
    assert not at.exception
    assert any("batch must be ≤ n" in e.value for e in at.error)
