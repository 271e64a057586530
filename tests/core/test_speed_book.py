"""The speed book: measured rates where a class ran, a rank-1 fill where it did not
(issue 35), and the same estimates on replay whatever was asked in between."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.speed_book import KEEP, SpeedBook

CATALOG = {"V100": 10.0, "P100": 6.0, "K80": 2.0}


def test_a_measured_rate_is_the_median_of_the_last_observations() -> None:
    book = SpeedBook(CATALOG)
    for rate in (9.0, 1.0, 10.0, 11.0):
        assert book.observe("resnet", 1, "V100", rate)
    est = book.estimate("resnet", 1, "V100")
    assert est is not None and (est.rate, est.observations) == (9.5, 4)
    assert est.basis == "p50 of 4 measurements"
    for _ in range(KEEP):
        book.observe("resnet", 1, "V100", 20.0)
    est = book.estimate("resnet", 1, "V100")
    assert est is not None and (est.rate, est.observations) == (20.0, KEEP)  # old ones left


def test_nothing_is_estimated_for_a_row_never_measured() -> None:
    book = SpeedBook(CATALOG)
    book.observe("resnet", 1, "V100", 9.0)
    assert book.estimate("bert", 1, "V100") is None
    assert book.estimate("resnet", 2, "V100") is None  # another GPU count is another row
    assert book.relative("bert", 1, list(CATALOG)) == {}
    assert book.estimate("resnet", 1, "H100") is None  # a model the catalog lacks


@pytest.mark.parametrize("rate", [0.0, -1.0, math.nan, math.inf])
def test_a_rate_that_is_no_measurement_is_refused_and_changes_nothing(rate: float) -> None:
    book = SpeedBook(CATALOG)
    assert not book.observe("resnet", 1, "V100", rate)
    assert not book.observe("resnet", 1, "A800", 5.0)  # unknown model
    assert book.estimate("resnet", 1, "V100") is None


def test_a_prior_must_be_positive() -> None:
    with pytest.raises(ValueError, match="K80"):
        SpeedBook({"V100": 10.0, "K80": 0.0})


def test_a_model_nobody_ran_on_is_ranked_by_the_catalog() -> None:
    book = SpeedBook(CATALOG)
    book.observe("resnet", 1, "K80", 3.0)
    k80 = book.estimate("resnet", 1, "K80")
    v100 = book.estimate("resnet", 1, "V100")
    assert k80 is not None and v100 is not None and v100.observations == 0
    assert v100.rate / k80.rate == pytest.approx(CATALOG["V100"] / CATALOG["K80"])
    assert v100.basis == "filled from the catalog's figures for V100"


def test_what_other_classes_showed_of_two_models_carries_over() -> None:
    """Ten classes run 4x faster on a V100 than on a K80 (the catalog says 5x): a class
    seen only on K80s is filled at about 4x, between the catalog and the data, and much
    nearer the data (ten measured classes against one prior)."""
    book = SpeedBook(CATALOG)
    for n in range(10):
        base = 1.0 + n
        book.observe(f"c{n}", 1, "K80", base)
        book.observe(f"c{n}", 1, "V100", 4.0 * base)
    book.observe("new", 1, "K80", 2.0)
    rel = book.relative("new", 1, ["K80", "V100"])
    ratio = 1.0 / rel["K80"][0]
    assert 4.0 < ratio < 4.0 + (5.0 - 4.0) / 5  # pulled toward 5 by one part in eleven-ish
    assert rel["V100"][0] == 1.0 and rel["V100"][1].observations == 0
    assert rel["V100"][1].basis.startswith("filled from 10 other classes measured on V100")


def test_a_job_faster_on_the_older_gpu_is_told_so_where_measured() -> None:
    book = SpeedBook(CATALOG)
    book.observe("a3c", 1, "P100", 12.0)
    book.observe("a3c", 1, "V100", 10.0)
    rel = book.relative("a3c", 1, ["P100", "V100", "K80"])
    assert rel["P100"][0] == 1.0 and rel["V100"][0] == pytest.approx(10.0 / 12.0)
    assert rel["K80"][0] < rel["V100"][0]


observation = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([1, 2]),
    st.sampled_from(sorted(CATALOG)),
    st.floats(min_value=1e-3, max_value=1e4, allow_nan=False),
)


def _all_estimates(book: SpeedBook) -> dict[tuple[str, int, str], tuple[float, int, str] | None]:
    out = {}
    for cls in "abc":
        for gpus in (1, 2):
            for model in sorted(CATALOG):
                e = book.estimate(cls, gpus, model)
                out[(cls, gpus, model)] = None if e is None else (e.rate, e.observations, e.basis)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(observation, max_size=40), st.lists(st.integers(0, 40), max_size=5))
def test_replay_gives_the_same_estimates_whatever_was_asked_in_between(
    stream: list[tuple[str, int, str, float]], asked_at: list[int]
) -> None:
    live, replayed = SpeedBook(CATALOG), SpeedBook(CATALOG)
    seen_rows: set[tuple[str, int]] = set()
    for i, (cls, gpus, model, rate) in enumerate(stream):
        if i in asked_at:
            _all_estimates(live)  # a query (explain, a placement) must change nothing
        for (c, g, m), est in _all_estimates(live).items():
            if (c, g) not in seen_rows:  # nothing before the row's first observation
                assert est is None, (c, g, m)
        live.observe(cls, gpus, model, rate)
        seen_rows.add((cls, gpus))
    for cls, gpus, model, rate in stream:
        replayed.observe(cls, gpus, model, rate)
    assert _all_estimates(live) == _all_estimates(replayed)


@settings(max_examples=60, deadline=None)
@given(st.lists(observation, max_size=40),
       st.lists(st.sampled_from(sorted(CATALOG)), min_size=1, max_size=3))
def test_a_remembered_relative_answer_is_what_a_fresh_book_gives(
    stream: list[tuple[str, int, str, float]], models: list[str]
) -> None:
    """``relative`` is remembered until an observation may change it: asked after every
    observation, each row's answer is the one a book that never answered before gives."""
    live = SpeedBook(CATALOG)
    for i, (cls, gpus, model, rate) in enumerate(stream):
        live.observe(cls, gpus, model, rate)
        fresh = SpeedBook(CATALOG)
        for c, g, m, r in stream[: i + 1]:
            fresh.observe(c, g, m, r)
        for c in "abc":
            for g in (1, 2):
                assert live.relative(c, g, models) == fresh.relative(c, g, models), (c, g)


@settings(max_examples=60, deadline=None)
@given(st.lists(observation, max_size=40))
def test_a_rows_generation_changes_whenever_its_answers_may(
    stream: list[tuple[str, int, str, float]]
) -> None:
    """The cell keys its memo of ``relative`` and ``knows`` by ``generation``: a row whose
    answers changed with an observation must have a new generation."""
    book = SpeedBook(CATALOG)
    rows = [(c, g) for c in "abc" for g in (1, 2)]
    models = sorted(CATALOG)
    before = {r: (book.generation(*r), book.knows(*r), book.relative(*r, models)) for r in rows}
    for cls, gpus, model, rate in stream:
        book.observe(cls, gpus, model, rate)
        for r in rows:
            now = (book.generation(*r), book.knows(*r), book.relative(*r, models))
            if now[1:] != before[r][1:]:
                assert now[0] != before[r][0], r
            before[r] = now
