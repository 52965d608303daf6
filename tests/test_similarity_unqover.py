"""UnQover in the similarity chapter: its questions generated from the mirror's templates and word lists, and its bias
measures (Li et al. 2020) on hand-made answers whose values are known."""

from __future__ import annotations

import pandas as pd
import pytest

from llmaudit.chapters.similarity.unqover import DIMENSIONS, load_attributes, load_unqover, questions
from llmaudit.chapters.similarity.unqover_bias import model_bias, scored, subject_attribute_bias, unit_scores


def _unit(s_a: dict[tuple[str, bool], float], *, a: str = "x", b: str = "y", attribute: str = "q",
          template: int = 0) -> list[dict]:
    """The four questions of one unit with S(a | order, negated) given and S(b) = 1 - S(a) (a forced choice)."""
    return [{"dimension": "d", "template": template, "subject_a": a, "subject_b": b, "attribute": attribute,
             "order": order, "negated": negated, "s_a": value, "s_b": 1.0 - value}
            for (order, negated), value in s_a.items()]


def test_bias_score_removes_position_and_negation_errors_by_hand() -> None:
    """S(a): 0.9 named first, 0.5 second; 0.6 and 0.2 for the negation. By the paper's formulas B(a) = 0.7 - 0.4 = 0.3,
    B(b) = 0.3 - 0.6 = -0.3, C = 0.3; positional error |0.9-0.5| = |0.6-0.2| = 0.4 for both subjects; attributive
    error (|0.9-0.4| + |0.1-0.6| + |0.5-0.8| + |0.5-0.2|) / 4 = 0.4."""
    rows = pd.DataFrame(_unit({("ab", False): 0.9, ("ba", False): 0.5, ("ab", True): 0.6, ("ba", True): 0.2}))
    units = unit_scores(rows)
    assert units["c"].item() == pytest.approx(0.3)
    assert units["pos_err"].item() == pytest.approx(0.4)
    assert units["attr_err"].item() == pytest.approx(0.4)


@pytest.mark.parametrize(("answers", "c", "pos_err", "attr_err"), [
    # always the subject named first: no bias, all position
    ({("ab", False): 1.0, ("ba", False): 0.0, ("ab", True): 1.0, ("ba", True): 0.0}, 0.0, 1.0, 1.0),
    # always a, negated or not: no bias, the negation ignored
    ({("ab", False): 1.0, ("ba", False): 1.0, ("ab", True): 1.0, ("ba", True): 1.0}, 0.0, 0.0, 1.0),
    # a for the attribute, b for its negation, in either order: full bias, no error
    ({("ab", False): 1.0, ("ba", False): 1.0, ("ab", True): 0.0, ("ba", True): 0.0}, 1.0, 0.0, 0.0),
])
def test_only_an_attribute_preference_that_survives_order_and_negation_is_bias(answers, c, pos_err, attr_err) -> None:
    units = unit_scores(pd.DataFrame(_unit(answers)))
    found = (units["c"].item(), units["pos_err"].item(), units["attr_err"].item())
    assert found == pytest.approx((c, pos_err, attr_err))


def test_gamma_eta_and_mu_aggregate_over_partners_and_attributes() -> None:
    """x is tied to q against y (C = 1) and against z (C = 0.5), and nobody to r (C = 0): gamma(x, q) = 0.75,
    gamma(y, q) = -1, gamma(z, q) = -0.5; eta(x, q) = 1. mu = mean over x, y, z of max |gamma| = (0.75 + 1 + 0.5)
    / 3 = 0.75; eta = mean over subjects of mean |eta| over their attributes = (1/2 + 1/2 + 1/2) / 3 = 0.5."""
    full = {("ab", False): 1.0, ("ba", False): 1.0, ("ab", True): 0.0, ("ba", True): 0.0}
    half = {("ab", False): 0.75, ("ba", False): 0.75, ("ab", True): 0.25, ("ba", True): 0.25}
    none = {key: 0.5 for key in full}
    rows = pd.DataFrame(_unit(full, b="y") + _unit(half, b="z") + _unit(none, b="y", attribute="r")
                        + _unit(none, b="z", attribute="r"))
    units = unit_scores(rows)
    gamma = subject_attribute_bias(units).set_index(["subject", "attribute"])
    assert gamma.loc[("x", "q"), "gamma"] == pytest.approx(0.75) and gamma.loc[("x", "q"), "eta"] == 1.0
    assert gamma.loc[("y", "q"), "gamma"] == pytest.approx(-1.0) and gamma.loc[("z", "q"), "gamma"] == -0.5
    bias = model_bias(units).loc["d"]
    assert bias["mu"] == pytest.approx(0.75) and bias["eta"] == pytest.approx(0.5)


def test_a_unit_missing_a_question_is_refused() -> None:
    rows = pd.DataFrame(_unit({("ab", False): 1.0, ("ba", False): 1.0, ("ab", True): 0.0}))
    with pytest.raises(Exception, match="four questions"):
        unit_scores(rows)


def test_letter_shares_map_to_subjects_by_order() -> None:
    frame = pd.DataFrame({"order": ["ab", "ba"]})
    out = scored(frame, [[0.8, 0.2], [0.8, 0.2]])  # A is the subject named first
    assert out["s_a"].tolist() == [0.8, 0.2] and out["s_b"].tolist() == [0.2, 0.8]


def test_questions_cover_both_orders_and_the_negation(mirror) -> None:
    drawn = load_unqover(3, seed=0, mirror=mirror)
    assert set(drawn["dimension"]) == set(DIMENSIONS) and len(drawn) == 4 * 3 * len(DIMENSIONS)
    for _, unit in drawn.groupby(["dimension", "template", "subject_a", "subject_b", "attribute"]):
        assert sorted(zip(unit["order"], unit["negated"])) == [("ab", False), ("ab", True), ("ba", False),
                                                               ("ba", True)]
        first = unit[unit["order"] == "ab"].iloc[0]
        assert first["context"].index(first["first"]) < first["context"].index(first["second"])
        asked, negated = unit.loc[~unit["negated"], "question"], unit.loc[unit["negated"], "question"]
        assert set(asked).isdisjoint(negated) and "[" not in "".join(unit["context"]) + "".join(unit["question"])
    assert questions("religion", 3, seed=0, mirror=mirror).equals(questions("religion", 3, seed=0, mirror=mirror))


def test_occupations_are_negated_as_the_demo_list_does(mirror) -> None:
    occupations = load_attributes("occupation_rev1", mirror)["[p_act]"]
    assert {"text": "was an accountant", "negated": "can never be an accountant", "cluster": "",
            "attribute": "was an accountant"} in occupations
    country = load_attributes("biased_country", mirror)
    assert country["[l_act-single]"][0]["attribute"] == country["[l_act]"][0]["text"]  # one attribute, two forms


def test_every_unit_of_a_dimension_when_asked_for_more_than_it_has(mirror) -> None:
    """Religion: 14 templates x 55 pairs of 11 groups x 50 attributes = 38,500 units (the count the chapter states);
    asking for more gives every one, once."""
    every = questions("religion", 10**9, seed=0, mirror=mirror)
    units = every.drop_duplicates(["template", "subject_a", "subject_b", "attribute"])
    assert len(every) == 4 * len(units) == 4 * 38_500


def test_unqover_results_are_declared_and_the_comparison_matches_categories() -> None:
    from llmaudit.chapters.similarity import tables
    from llmaudit.chapters.similarity.spec import CHAPTER, SimilarityParams
    from llmaudit.spec import declared

    rows = pd.DataFrame(_unit({("ab", False): 1.0, ("ba", False): 1.0, ("ab", True): 0.0, ("ba", True): 0.0}))
    scores = model_bias(unit_scores(rows.assign(dimension="religion")))
    answers = pd.DataFrame({"system": ["m", "m"], "mass": [0.5, 0.7]})
    found = tables.unqover({"m": scores, "m v λ=+1": scores}, answers, "m")
    names = found.results.index.tolist()
    assert {"unqover.religion.mu", "unqover.steered_+1.religion.eta", "unqover.answer_mass"} <= set(names)
    assert all(declared(CHAPTER.results, name) is not None for name in names)
    assert found.results.loc["unqover.answer_mass", "value"] == pytest.approx(0.6)
    bbq = pd.DataFrame({"unk_amb": [0.9], "unk_dis": [0.1], "acc_amb": [0.9], "acc_dis": [0.5], "s_amb": [1.0],
                        "s_dis": [10.0]}, index=pd.Index(["Religion"], name="category"))
    table = tables.abstention_masks_bias({"m": bbq, "base": bbq}, {"m": scores})  # base: no UnQover answers saved
    assert table.loc[("m", "religion"), "bbq_unk_amb"] == pytest.approx(90.0)  # BBQ in percent beside UnQover x100
    assert table.loc[("m", "religion"), "unqover_mu"] == pytest.approx(100.0)
    assert list(table.index) == [("m", "religion")]
    assert SimilarityParams().unqover == 62_500  # about paper 003's million samples over the four dimensions
    with pytest.raises(ValueError, match="unqover"):
        SimilarityParams(unqover=0)


def test_unqover_answers_are_saved_and_read_back_per_model(tmp_path) -> None:
    from llmaudit.chapters.similarity.saved import load_unqover_answers, save_systems

    rows = pd.DataFrame(_unit({("ab", False): 0.9, ("ba", False): 0.5, ("ab", True): 0.6, ("ba", True): 0.2}))
    answers = pd.DataFrame({"category": ["Age"], "example_id": [0], "system": ["m"], "pred": [0]})
    save_systems(tmp_path / "m", answers, {}, unqover=rows.assign(system="m", extra=1))
    back = load_unqover_answers(tmp_path, ["m", "older"])  # 'older': audited before UnQover, no rows
    assert set(back["system"]) == {"m"} and "extra" not in back
    assert unit_scores(back)["c"].item() == pytest.approx(0.3)  # the saved answers give the same measure


def test_bias_intervals_cover_the_estimate_and_shrink_with_more_units() -> None:
    """Units whose C is +1 or 0 at random: the interval of eta brackets its estimate, and 16 times the units give an
    interval about a quarter as wide."""
    from llmaudit.chapters.similarity.unqover_bias import bias_intervals

    full = {("ab", False): 1.0, ("ba", False): 1.0, ("ab", True): 0.0, ("ba", True): 0.0}
    none = {key: 0.5 for key in full}

    def units(n: int) -> pd.DataFrame:
        rows = [row for i in range(n) for row in _unit(full if i % 2 else none, b=f"y{i % 4}", template=i)]
        return unit_scores(pd.DataFrame(rows))

    few, many = (bias_intervals(units(n), seed=0, draws=400).loc["d"] for n in (16, 256))
    estimate = model_bias(units(16)).loc["d", "eta"]
    assert few["eta_low"] <= estimate <= few["eta_high"]
    width = (many["eta_high"] - many["eta_low"]) / (few["eta_high"] - few["eta_low"])
    assert 0.1 < width < 0.5


def test_weighted_bias_with_every_unit_once_is_model_bias() -> None:
    from llmaudit.chapters.similarity.unqover_bias import weighted_bias

    values = [0.9, 0.5, 0.6, 0.2]
    rows = [row for i, subject in enumerate("pqrs") for row in _unit(
        dict(zip([("ab", False), ("ba", False), ("ab", True), ("ba", True)], values[i:] + values[:i])),
        a=subject, b="pqrs"[(i + 1) % 4], attribute="qr"[i % 2])]
    units = unit_scores(pd.DataFrame(rows))
    mu, eta = weighted_bias(units, [[1, 1, 1, 1], [2, 0, 1, 1]])
    assert (mu[0], eta[0]) == pytest.approx(tuple(model_bias(units).loc["d", ["mu", "eta"]]))
    doubled = unit_scores(pd.DataFrame(rows[:4] + rows[:4] + rows[8:]).assign(
        template=[0] * 4 + [1] * 4 + [0] * 8))  # the first unit twice, the second left out
    assert (mu[1], eta[1]) == pytest.approx(tuple(model_bias(doubled).loc["d", ["mu", "eta"]]))
