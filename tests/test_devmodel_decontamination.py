"""The development model's training requests stay clear of the evaluation set (a test set)."""

from __future__ import annotations

from pathlib import Path

from tools.devmodel.decontaminate import HERE, Questions, check

REQUESTS = HERE / "data" / "requests"


def test_no_training_request_is_close_to_an_evaluation_question():
    questions = Questions.read()
    assert len(questions._asked) >= 1000  # every phrasing of the 252 questions is compared
    assert check(REQUESTS, questions) == []


def test_close_requests_are_found_and_dropped_whole_field_only(tmp_path: Path):
    questions = Questions(
        [("q1", "Stop that build, I pushed the wrong branch"), ("q2", "send document for signature")]
    )
    folder = tmp_path / "requests"
    folder.mkdir()
    (folder / "a.txt").write_text(
        "# a comment\n== npm:ci@1.0.0\n"
        "cancel_run | cancel run | stop that plan, I pushed the wrong branch | halt the deploy | | \n"
        "sign | send document for signature | get Rūta to sign the lease | | | \n",
        encoding="utf-8",
    )
    found = check(folder, questions)
    assert [line.split(" ~ ")[1].split(" ")[0] for line in found] == ["q1", "q2"]
    check(folder, questions, drop=True)
    lines = (folder / "a.txt").read_text(encoding="utf-8").splitlines()
    assert lines[2].split(" | ")[:4] == ["cancel_run", "cancel run", "", "halt the deploy"]
    assert lines[3].split(" | ")[:3] == ["sign", "", "get Rūta to sign the lease"]
    assert check(folder, questions) == []
