"""The book's table of contents, built from the registered chapters: the introduction, the audited-models index,
each chapter as the default model's executed notebook, then the glossary the chapters' terms link to.
`python -m llmaudit.contents [FILE]` writes it (default _toc.yml), as `make book` does before each build."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from llmaudit.paths import REPO
from llmaudit.registry import KEYS, notebook

DEFAULT_MODEL = "smollm2-135m-instruct"  # the model whose executed chapters the book shows (make audit's default)
GLOSSARY = "book/glossary"  # the {glossary} page every chapter's {term} roles resolve to


def table_of_contents(model: str = DEFAULT_MODEL) -> str:
    """The _toc.yml text of a book showing `model`'s report folder."""
    chapters = [{"file": "reports/index"}, *({"file": f"reports/{model}/{notebook(key)}"} for key in KEYS),
                {"file": GLOSSARY}]
    header = "# Written by `python -m llmaudit.contents` from the chapter registry (lib/llmaudit/registry.py).\n"
    return header + yaml.safe_dump({"format": "jb-book", "root": "book/intro", "chapters": chapters}, sort_keys=False)


def main(argv: list[str]) -> int:
    """Write the table of contents to the file named in argv (default: the repository's _toc.yml)."""
    target = Path(argv[0]) if argv else REPO / "_toc.yml"
    target.write_text(table_of_contents(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
