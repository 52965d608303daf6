"""A chapter's declarations are keyword-only and checked as they are made: a gate, verdict test or chapter spec given
positionally, or with a value outside its field's range, is refused at import rather than misread by the verdict."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from pydantic import ValidationError

from llmaudit.registry import CHAPTERS, gates, verdict_tests
from llmaudit.spec import ChapterSpec, Gate, VerdictTest

GATE: dict[str, Any] = {"instrument": "vector", "name": "corr", "label": "corr", "column": "value",
                        "threshold": "vector_corr", "default": 0.2, "top": 1.0, "strict": False, "failing": "no"}


@pytest.mark.parametrize("declared", [gates()[0], verdict_tests()[0], CHAPTERS[0]], ids=type)
def test_declarations_take_keywords_only(declared: Any) -> None:
    values = [getattr(declared, f.name) for f in fields(declared)]
    with pytest.raises((TypeError, ValidationError)):  # pydantic reports positional values as invalid
        type(declared)(*values)


@pytest.mark.parametrize("bad", [{"column": "hi"}, {"default": -0.1}, {"top": 0.0}, {"default": 1.0},
                                 {"threshold": "Vector corr"}, {"label": ""}])
def test_a_gate_out_of_its_fields_range_is_refused(bad: dict[str, Any]) -> None:
    Gate(**GATE)
    with pytest.raises(ValidationError):
        Gate(**{**GATE, **bad})


def test_a_verdict_test_of_unknown_kind_or_empty_name_is_refused() -> None:
    declared = {f.name: getattr(verdict_tests()[0], f.name) for f in fields(VerdictTest)}
    for bad in ({"kind": "equivalence"}, {"name": ""}, {"instruments": (("task",),)}):
        with pytest.raises(ValidationError):
            VerdictTest(**{**declared, **bad})


def test_a_chapter_key_must_name_a_notebook_and_params_key() -> None:
    declared = {f.name: getattr(CHAPTERS[0], f.name) for f in fields(ChapterSpec)}
    for bad in ({"key": "Steering vectors"}, {"computing": ()}):
        with pytest.raises(ValidationError):
            ChapterSpec(**{**declared, **bad})
