"""The book's table of contents, built from the registered chapters: the introduction, each chapter as the default
model's executed notebook (numbered 1, 2, ..., so figures and equations read 2.1), the audited-models index the
chapters lead up to, then the reference pages (running, verdicts, guarantees, engines, endpoints, extending) and the
glossary the chapters' terms link to. `python -m llmaudit.runner.contents [FILE]` writes it (default _toc.yml),
as `make book` does before each build, and stops with one line when the audit has not written the pages yet;
with `--toc-only` it writes the file whatever pages exist (after registering a chapter, with no audit at hand)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from llmaudit.paths import REPO
from llmaudit.registry import KEYS, notebook

DEFAULT_MODEL = "smollm2-135m-instruct"  # the model whose executed chapters the book shows (make audit's default)
INDEX = "reports/index"  # the audited-models page every audit rewrites (llmaudit.report.index.build_index)
GLOSSARY = "book/glossary"  # the {glossary} page every chapter's {term} roles resolve to
REFERENCE = "book/reference/index"  # the tool's reference: what moved out of the README
# the Reference part's sections, in reading order
REFERENCE_PAGES = ("running", "verdicts", "guarantees", "engines", "endpoints", "extending")


def chapter_pages(model: str = DEFAULT_MODEL) -> list[str]:
    """The toc paths of `model`'s executed chapter notebooks, in book order."""
    return [f"reports/{model}/{notebook(key)}" for key in KEYS]


def table_of_contents(model: str = DEFAULT_MODEL) -> str:
    """The _toc.yml text of a book showing `model`'s report folder: the numbered chapters, then, unnumbered, the
    index of audited models and the reference with the glossary."""
    reference = {"file": REFERENCE, "sections": [{"file": f"book/reference/{page}"} for page in REFERENCE_PAGES]}
    parts = [
        {"caption": "Chapters", "numbered": True, "chapters": [{"file": page} for page in chapter_pages(model)]},
        {"caption": "Results", "chapters": [{"file": INDEX}]},
        {"caption": "Reference", "chapters": [reference, {"file": GLOSSARY}]},
    ]
    header = "# Written by `python -m llmaudit.runner.contents` from the chapter registry (lib/llmaudit/registry.py).\n"
    return header + yaml.safe_dump({"format": "jb-book", "root": "book/intro", "parts": parts}, sort_keys=False)


def missing_pages(root: Path, model: str = DEFAULT_MODEL) -> list[str]:
    """The pages the audit writes (the index, `model`'s executed chapters) that the book folder `root` lacks."""
    wanted = [f"{INDEX}.md", *(f"{page}.ipynb" for page in chapter_pages(model))]
    return [page for page in wanted if not (root / page).is_file()]


def main(argv: list[str]) -> int:
    """Write the table of contents to the file named in argv (default: the repository's _toc.yml); return 1 with one
    line on stderr, writing nothing, when the book folder lacks a page the audit writes (unless `--toc-only`)."""
    files = [a for a in argv if a != "--toc-only"]
    target = Path(files[0]) if files else REPO / "_toc.yml"
    missing = [] if "--toc-only" in argv else missing_pages(target.resolve().parent)
    if missing:
        print(f"the book needs the default model's audit ({len(missing)} page(s) missing, e.g. {missing[0]}): "
              "run `make audit` first", file=sys.stderr)
        return 1
    target.write_text(table_of_contents(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
