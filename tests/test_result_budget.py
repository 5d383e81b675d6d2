"""`ResultBudget` (service/results.py): one decision of an answer's bytes, one cut, each result measured once.

The three budgets the proxy decides (the five tools' answer, each call's share of a batch, the room
of a Lambda response) hold results through `fit`; a result one of them measured is not measured by
the next of the same count.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolsearch.server.response_size import ResponseSize
from toolsearch.service.results import (
    Fitted,
    ResultBudget,
    StructuredResult,
    batch_bound,
    limit_result,
    structured_result,
    was_cut,
)

LAMBDA = ResponseSize.lambda_runtime("AWS_Lambda_python3.13")


class Counted:
    """A size count that counts how often it measured something (its own bytes: the local count)."""

    def __init__(self) -> None:
        self.measured = 0
        self._of = ResponseSize.local().of

    def __call__(self, value: Any) -> int:
        self.measured += 1
        return self._of(value)


def upstream_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def test_a_result_that_fits_is_measured_once_and_marked_with_its_size():
    size = Counted()
    result = upstream_result("x" * 1_000)
    fitted = ResultBudget(5_000, size).fit(result)
    assert size.measured == 1
    assert isinstance(fitted, Fitted) and fitted == result and not was_cut(fitted)
    assert fitted.bound() == fitted.measured == ResponseSize.local().of(result)
    assert json.dumps(fitted) == json.dumps(result)  # the wire is the same


def test_a_fitted_result_is_not_measured_again_by_a_budget_of_the_same_count():
    size = Counted()
    share = ResultBudget(10_000, size).share(4, 500)
    fitted = share.fit(upstream_result("x" * 1_000))
    answer = ResultBudget(10_000, size)
    assert answer.fit(fitted) is fitted
    assert size.measured == 1


def test_a_fitted_result_is_measured_again_under_another_count_or_a_smaller_budget():
    size = Counted()
    fitted = ResultBudget(10_000, size).fit(upstream_result("x" * 1_000))
    assert not ResultBudget(10_000, LAMBDA.of).fits(fitted)  # counted otherwise: no bound known
    assert ResultBudget(500, size).fits(fitted) is False
    cut = ResultBudget(500, size).fit(fitted)
    assert was_cut(cut) and "it was cut" in cut["content"][-1]["text"]


def test_fit_cuts_as_limit_result_does():
    size = ResponseSize.local().of
    result = {**upstream_result("y" * 20_000), "structuredContent": {"y": 1}, "_meta": {"m": 1}}
    cut = ResultBudget(5_000, size).fit(result)
    assert was_cut(cut) and cut.bound() is None
    assert dict(cut) == limit_result(result, 5_000, size)
    assert cut["isError"] is True and cut["_meta"] == {"m": 1}


def test_a_structured_result_within_its_bound_stays_itself_unmeasured():
    size = Counted()
    result = structured_result({"hits": [{"name": "jira_get_issue"}]})
    assert ResultBudget(5_000_000, size).fit(result) is result
    assert isinstance(result, StructuredResult) and size.measured == 0


def test_a_share_is_the_answer_less_the_lines_divided_among_the_calls():
    budget = ResultBudget(100_000)
    assert budget.share(4, 500).max_bytes == (100_000 - 2_000) // 4
    assert budget.share(0, 500).max_bytes == 99_500  # no calls: one share
    assert ResultBudget(1_000).share(10, 500).max_bytes == 1  # never nothing
    assert budget.share(4, 500).size is budget.size


def test_a_fitted_result_changed_in_place_is_measured_again():
    """A reply shaped for its era in place (resultType, _meta added) no longer takes what was measured."""
    size = Counted()
    fitted = ResultBudget(10_000, size).fit(upstream_result("x" * 1_000))
    fitted.setdefault("resultType", "complete")
    fitted["_meta"] = {"padding": "y" * 10_000}
    assert fitted.bound() is None
    assert was_cut(ResultBudget(10_000, size).fit(fitted))
    assert size.measured > 1


def test_a_cut_result_stays_known_as_cut_when_a_later_budget_passes_it():
    size = Counted()
    share = ResultBudget(5_000, size)
    cut = share.fit(upstream_result("z" * 20_000))
    again = ResultBudget(5_000_000, size).fit(cut)
    assert was_cut(again) and again == cut and again.bound() is not None


@pytest.mark.parametrize("size", [ResponseSize.local(), LAMBDA, ResponseSize.lambda_runtime("")])
def test_a_batchs_combined_answer_takes_at_most_its_bound(size):
    budget = ResultBudget(5_000_000, size.of)
    share = budget.share(3, 500)
    parts = [
        share.fit(upstream_result('a "quoted" žėų 😀 ' * 50)),
        structured_result({"rows": ['"x"\\'] * 20}),
        {"content": [], "structuredContent": {"a": 1}, "isError": True},  # made a block in the answer
    ]
    labels = [{"type": "text", "text": f"[{n}] tool_{n}: ok"} for n in (1, 2, 3)]
    content: list[Any] = []
    for label, part in zip(labels, parts, strict=True):
        content += [label, *(part["content"] or [structured_result(part["structuredContent"])["content"][0]])]
    shown = [part if part["content"] else [content[-1]] for part in parts]

    for failed in (True, False):
        combined = {"content": content, "isError": failed}
        assert size.of(combined) <= batch_bound(budget, labels, shown)


def test_a_batch_within_its_budget_is_not_measured_again_as_a_whole():
    counted = Counted()
    budget = ResultBudget(5_000_000, counted)
    share = budget.share(2, 500)
    parts = [share.fit(upstream_result("one")), share.fit(upstream_result("two"))]
    labels = [{"type": "text", "text": "[1] a: ok"}, {"type": "text", "text": "[2] b: ok"}]
    counted.measured = 0
    known = batch_bound(budget, labels, parts)
    combined = Fitted({"content": [], "isError": False}, known, counted, cut=False)

    assert counted.measured == 3  # the empty answer and the two labels, not the parts again
    assert budget.fit(combined) is combined and counted.measured == 3


def test_a_fitted_result_whose_value_was_replaced_is_measured_again():
    from toolsearch.service.results import ResultBudget

    budget = ResultBudget(10_000)
    longer = [{"type": "text", "text": "much longer than the result that was measured"}]
    replaced = budget.fit({"content": [{"type": "text", "text": "short"}]})
    replaced["content"] = longer
    removed_and_added = budget.fit({"content": [{"type": "text", "text": "short"}]})
    del removed_and_added["content"]  # the old list freed: a new one may take its address
    removed_and_added["content"] = list(longer)
    assert budget.fit({"content": longer}).bound() is not None  # unchanged: its figure is trusted
    assert replaced.bound() is None and removed_and_added.bound() is None
