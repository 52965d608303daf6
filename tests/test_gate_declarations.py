"""The verdict page's gates are the chapters' declarations: each threshold is one field of the params file's
`gates` section with the declared default, no two gates share a threshold, and each gate knows its chapter."""

from __future__ import annotations

from llmaudit.registry import CHAPTERS
from llmaudit.verdict.gates import GATES, GateParams


def test_each_gate_has_its_own_threshold_field_with_the_declared_default() -> None:
    thresholds = [gate.threshold for gate in GATES]
    assert len(set(thresholds)) == len(thresholds)
    defaults = GateParams()
    assert sorted(GateParams.model_fields) == sorted(thresholds)
    assert all(getattr(defaults, gate.threshold) == gate.default for gate in GATES)


def test_the_verdict_reads_every_declared_gate_with_its_chapter() -> None:
    declared = [(spec.key, gate.name) for spec in CHAPTERS for gate in spec.gates]
    assert [(gate.chapter, gate.name) for gate in GATES] == declared
    assert {gate.instrument for gate in GATES} == {"vector", "task", "probes"}
