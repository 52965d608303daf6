"""The README stays short and true: at most about 6 KB, the two commands as the Makefile and CI run them, and every
link it gives resolves to a file of the repository; what it used to hold is in the book's Reference part, whose pages
the book's contents list."""

from __future__ import annotations

import re

from llmaudit.paths import REPO
from llmaudit.runner.contents import REFERENCE, REFERENCE_PAGES, table_of_contents

README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)#]+)\)")  # a Markdown link's target, without its anchor


def test_readme_is_short_and_opens_on_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 6 * 1024
    assert "make audit   # installs into .venv" in text and "make test    # installs into .venv" in text
    assert "make check" in (REPO / ".ci" / "run").read_text(encoding="utf-8")  # what CI runs is what it says
    assert "`make check`" in text  # and the README says CI runs it
    check = (REPO / "Makefile").read_text(encoding="utf-8").split("\ncheck:")[1].split("\n\n")[0]
    assert "scale-test" in check and " test;" in check  # which runs the tests and the scale test


def test_readme_links_resolve() -> None:
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    assert targets and [target for target in targets if not (REPO / target).is_file()] == []


def test_reference_pages_exist_and_are_in_the_contents() -> None:
    toc = table_of_contents()
    for page in (REFERENCE, *(f"book/reference/{name}" for name in REFERENCE_PAGES)):
        assert (REPO / f"{page}.md").is_file(), page
        assert f"file: {page}\n" in toc, page
