"""Params are typed all the way down: each chapter's section is a field of `Params` of its declared class, so an
editor and mypy see `params.tasks.sizes` as a mapping of sizes and flag a misspelt setting, and the sections stay the
ones the chapters declare."""

from __future__ import annotations

import os
import subprocess
import sys
import typing

from llmaudit.config import Params
from llmaudit.paths import REPO
from llmaudit.registry import CHAPTERS, Sections

SNIPPET = """from llmaudit.config import load_params

params = load_params("ci")
reveal_type(params.tasks.sizes)
reveal_type(params.similarity.compare_with)
params.tasks.sizez
"""


def test_every_declared_section_is_a_typed_field_of_params() -> None:
    hints = typing.get_type_hints(Params)
    declared = {spec.section: spec.params for spec in CHAPTERS if spec.section}
    assert {name: hints[name] for name in Sections.model_fields} == declared
    assert "__getattr__" not in vars(Params)


def test_mypy_sees_the_settings_below_a_section(tmp_path) -> None:
    snippet = tmp_path / "uses_params.py"
    snippet.write_text(SNIPPET)
    env = {**os.environ, "MYPYPATH": str(REPO / "lib")}
    found = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), str(snippet)],
                           capture_output=True, text=True, cwd=REPO, env=env).stdout
    assert 'Revealed type is "builtins.dict[builtins.str, builtins.int | None]"' in found \
        or 'Revealed type is "dict[str, int | None]"' in found, found
    assert 'Revealed type is "builtins.list[builtins.str]"' in found or 'Revealed type is "list[str]"' in found, found
    assert '"TaskParams" has no attribute "sizez"' in found, found
