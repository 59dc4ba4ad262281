"""A fair CP method's default strength, chosen on the frontier (issue 24): the rule on frontiers
built by hand (every branch), on a salaries-like table where the previous default was less fair
than vanilla, its determinism, the replicates' λ, the paper's value one option away, and the
next step a *Worse* verdict names."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from fairaudit import prepare, read_table
from fairaudit.audit import AuditConfig, RecordSink, run_audit
from fairaudit.cpd import strength
from fairaudit.cpd.strength import FIT_LOSS_CAP, Point, choose, next_step
from fairaudit.errors import ParameterError
from fairaudit.findings import findings
from fairaudit.samples import salaries_like
from fairaudit.vocabulary import render

VANILLA = Point(0.0, 0.10, (0.80, 0.75, 0.85))


def frontier(*points: tuple[float, float, float]) -> list[Point]:
    """Points at λ = 1, 2, 4, … with ``(residual fit, balanced accuracy, interval half-width)``."""
    return [Point(2.0**i, fit, (b, b - w, b + w)) for i, (fit, b, w) in enumerate(points)]


def test_the_smallest_lambda_that_removes_nearly_all_the_leakage_it_can():
    # leakage above chance 0.30 for vanilla; the sweep removes at most 0.25 (to 0.55); 90 % of that: ≤ 0.575
    points = frontier((0.11, 0.78, 0.05), (0.12, 0.65, 0.05), (0.13, 0.57, 0.04), (0.14, 0.555, 0.04), (0.15, 0.55, 0.04))
    choice = choose(VANILLA, points, 0.5, rank=4)
    assert (choice.index, choice.reason, choice.lam) == (2, "reaches", 4.0)
    assert choice.text.startswith("λ = 4.00, point 3 of the 5 swept at rank 4: the smallest that removes at least 90 %")
    assert "the lowest, 0.550, at λ = 16.0" in choice.text


def test_below_chance_is_no_more_fair_than_chance():
    """A balanced accuracy below chance counts as no leakage (noise, or the classifier's cross-validation
    anti-learning an embedding forced independent): the first point at chance is chosen, not the lowest."""
    points = frontier((0.11, 0.50, 0.05), (0.12, 0.40, 0.04), (0.13, 0.30, 0.04))
    assert choose(VANILLA, points, 0.5, rank=2).index == 0


def test_no_gain_beyond_the_intervals_gives_the_weakest_lambda_that_is_not_worse():
    vanilla = Point(0.0, 0.10, (0.60, 0.48, 0.72))
    points = frontier((0.11, 0.99, 0.01), (0.12, 0.58, 0.12), (0.13, 0.55, 0.12))  # point 0 is less fair than vanilla
    choice = choose(vanilla, points, 0.5, rank=7)
    assert (choice.index, choice.reason) == (1, "no_gain")
    assert "no λ lowers the leakage beyond the intervals" in choice.text


def test_points_that_give_up_the_fit_are_not_chosen():
    # vanilla explains 1 − 0.1² = 0.99; the cap keeps 0.9 × 0.99: residual fit ≤ √(1 − 0.891) = 0.330
    cap = math.sqrt(1 - (1 - FIT_LOSS_CAP) * (1 - 0.10**2))
    points = frontier((0.2, 0.70, 0.02), (cap + 0.01, 0.50, 0.02))
    assert choose(VANILLA, points, 0.5, rank=3).index == 0
    none_keeps = frontier((0.5, 0.5, 0.02), (0.9, 0.5, 0.02))
    choice = choose(VANILLA, none_keeps, 0.5, rank=3)
    assert (choice.index, choice.reason) == (0, "no_admissible") and "gives up more than 10 %" in choice.text


def test_when_every_point_is_less_fair_the_choice_says_so():
    points = frontier((0.11, 0.95, 0.02), (0.12, 0.97, 0.02))
    choice = choose(VANILLA, points, 0.5, rank=3)
    assert (choice.index, choice.reason) == (0, "all_worse")
    assert choose(VANILLA, [None, None], 0.5, rank=3) is None  # every fit diverged: no choice (λ_ref is used)
    assert choose(VANILLA, [None, *points], 0.5, rank=3).index == 1  # a diverged point is never chosen


def test_the_next_step_names_a_setting_that_is_not_worse_in_each_interfaces_words():
    vanilla = Point(0.0, 0.10, (0.59, 0.46, 0.72))
    points = [(1.0, Point(1.0, 0.10, (0.59, 0.46, 0.72))), (2.0, Point(2.0, 0.12, (1.0, 0.99, 1.0))), (4.0, None)]
    text = next_step("FATR (orthogonality)", vanilla, points, 0.5, rank=7)
    assert text.startswith("Next step: at rank 7, λ = 1.00 is not less fair than vanilla")
    assert render(text, "cli").endswith("set it with --cpd-lambda 1.")
    assert "“Default λ” → “a value of my own” and 1 in “λ” (Tensor page)" in render(text, "dashboard")
    assert "lambda_choice=1" in render(text, "library")
    worse = [(1.0, Point(1.0, 0.10, (0.99, 0.98, 1.0))), (2.0, Point(2.0, 0.12, (1.0, 0.99, 1.0)))]
    none = next_step("FATR (orthogonality)", vanilla, worse, 0.5, rank=7)
    assert none.startswith("Next step: none on this frontier — at every λ swept at rank 7 (2 points, from λ = 1.00 to 2.00) FATR")
    assert "--cpd-sweep-rank" in render(none, "cli")


@pytest.fixture(scope="module")
def salaries():
    buffer = io.StringIO()
    salaries_like().to_csv(buffer, index=False)  # fairaudit.samples.salaries_like: issue 24's table, synthetic
    return prepare(read_table(buffer.getvalue().encode(), name="salaries.csv"), sensitive="sex", one_hot=True)


FAST = {"n_lambdas": 6, "n_epochs": 80}


def _leakage_verdicts(result) -> dict[str, str]:
    return {f.variant: f.verdict for f in findings(result)["cpd"] if f.text.startswith("From ")}


def test_on_the_salaries_table_no_fair_method_is_worse_at_its_default(salaries):
    """One-hot columns give the 397 × 8 matrix rank 6: the sweep goes to rank 5, not 7, and the
    frontier's defaults leave no method less fair than vanilla (at rank 7 λ_ref made all three so)."""
    result = run_audit(salaries, AuditConfig(methods=("cpd",), ranks=(3, 5, 7), random_state=0, options={"cpd": FAST}))
    sweep = result.records[result.records.variant.str.contains("@")]
    assert set(sweep["rank"]) == {5}
    verdicts = _leakage_verdicts(result)
    assert set(verdicts) == {"vanilla", "khsic", "hsic", "fatr"} and "worse" not in verdicts.values(), verdicts
    for name in ("khsic", "hsic", "fatr"):
        chosen = result.details["cpd"][name]["5"]["lambda_choice"]
        assert chosen.startswith("λ = ") and "swept at rank 5" in chosen
        finding = next(f for f in findings(result)["cpd"] if f.variant == name and f.text.startswith("From "))
        assert "The default λ was chosen on the frontier, λ = " in finding.text
    assert "7" in result.uncertainty["cpd"]["degenerate_ranks"]  # rank 7 ≥ the matrix's rank 6: an exact fit


def test_a_worse_default_names_the_setting_that_is_not(salaries):
    """The issue's situation: λ_ref at rank 7 (above the data's rank) is less fair than vanilla;
    the finding names a λ of the sweep that is not, and the frontier's own choice is not worse."""
    options = dict(FAST, sweep_rank=7, lambda_choice="reference")
    result = run_audit(salaries, AuditConfig(methods=("cpd",), ranks=(7,), variants="vanilla,fatr", random_state=0, bootstrap=0, options={"cpd": options}))
    fatr = next(f for f in findings(result)["cpd"] if f.variant == "fatr" and f.text.startswith("From "))
    assert fatr.verdict == "worse", fatr.text
    assert "Next step: at rank 7, λ = " in fatr.text and "is not less fair than vanilla" in fatr.text
    assert "--cpd-lambda " in render(fatr.text, "cli")
    assert any(f.text.startswith("Rank 7 is degenerate") for f in findings(result)["cpd"])
    frontier_run = run_audit(salaries, AuditConfig(methods=("cpd",), ranks=(7,), variants="vanilla,fatr", random_state=0, bootstrap=0,
                                                   options={"cpd": dict(options, lambda_choice="frontier")}))
    assert _leakage_verdicts(frontier_run)["fatr"] != "worse"


def test_the_choice_is_deterministic_and_the_papers_value_one_option_away(salaries):
    config = AuditConfig(methods=("cpd",), ranks=(5,), variants="vanilla,khsic", random_state=3, options={"cpd": FAST})
    first, second = (run_audit(salaries, config).details["cpd"]["khsic"]["5"]["lambda_choice"] for _ in range(2))
    assert first == second
    paper = run_audit(salaries, AuditConfig(methods=("cpd",), ranks=(5,), variants="vanilla,khsic", random_state=3,
                                            options={"cpd": dict(FAST, lambda_choice="paper")}))
    lam = paper.records[(paper.records.variant == "khsic") & (paper.records.metric == "lam")].value
    assert list(lam) == [0.04]  # Kim & Gittens' Fig. 2b λ_k
    finding = next(f for f in findings(paper)["cpd"] if f.variant == "khsic" and f.text.startswith("From "))
    assert "The default λ was the paper's Fig. 2b weight (lambda_choice='paper'" in render(finding.text)
    given = run_audit(salaries, AuditConfig(methods=("cpd",), ranks=(5,), variants="vanilla,hsic", random_state=3,
                                            options={"cpd": dict(FAST, lambda_choice=2.5, sweep=False)}))
    assert list(given.records[(given.records.variant == "hsic") & (given.records.metric == "lam")].value) == [2.5]


def test_replicates_refit_at_the_chosen_position_on_their_own_grid(salaries):
    """The choice is a position on the grid, fixed for the replicates: a replicate's λ is its own
    λ_ref times the chosen multiple, not the multiple of λ_ref (position 3 of 6 here)."""
    from fairaudit.cpd import audit as cpd_audit
    from fairaudit.cpd.sweep import default_index, lambda_grid

    family = cpd_audit.CPDAudit(salaries, AuditConfig(methods=("cpd",), ranks=(4, 5), variants="vanilla,hsic", random_state=0,
                                                      options={"cpd": FAST}), RecordSink("cpd"))
    fits = family.fit(np.arange(salaries.n_rows))
    chosen = family.choices["hsic"]
    rows = np.sort(np.random.default_rng(1).choice(salaries.n_rows, salaries.n_rows))
    replicate = family.fit(rows, warm=fits, replicate=True, seed=7)
    family.choices = {}  # what the reference rule would have refitted
    reference = family.fit(rows, warm=fits, replicate=True, seed=7)
    grid = lambda_grid(1.0, FAST["n_lambdas"])
    for rank in (4, 5):
        ratio = replicate.shared["lam"][("hsic", rank)] / reference.shared["lam"][("hsic", rank)]
        assert ratio == pytest.approx(grid[chosen.index] / grid[default_index(FAST["n_lambdas"])])


def test_a_bad_lambda_choice_is_refused_in_the_interfaces_words(salaries):
    with pytest.raises(ParameterError, match="lambda_choice must be frontier, reference, paper or a number >= 0") as error:
        run_audit(salaries, AuditConfig(methods=("cpd",), ranks=(2,), options={"cpd": {"lambda_choice": "knee"}}))
    assert "--cpd-lambda frontier" in error.value.render("cli")
    assert strength.RULES == ("frontier", "reference", "paper")
