"""Offline check of a built HTML book: every script, style, font and image its pages and CSS load is a file inside
the build folder, and every page with math loads a local MathJax. `python -m llmaudit.runner.book [_build/html]` runs
it."""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# url("..."), url('...') or url(...) in CSS (quoted data: URLs may hold parentheses), and @import "...".
CSS_REF = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^"')\s][^)]*?))\s*\)|@import\s+(?:"([^"]*)"|'([^']*)')""")


class PageRefs(HTMLParser):
    """One HTML page's resource references (every src/href/srcset except <a href>), inline CSS, scripts and math."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.resources: list[str] = []
        self.css: list[str] = []
        self.scripts: list[str] = []
        self.has_math = False
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Record the tag's references; <a href> is navigation to be followed, not a resource the page loads."""
        values = {name: value for name, value in attrs if value}
        self.has_math |= "math" in values.get("class", "").split()
        self._in_style = tag == "style"
        if "style" in values:
            self.css.append(values["style"])
        if tag == "script" and "src" in values:
            self.scripts.append(values["src"])
        names = ["src", "poster"] + ([] if tag == "a" else ["href"]) + (["data"] if tag == "object" else [])
        self.resources += [values[name] for name in names if name in values]
        self.resources += [part.split()[0] for part in values.get("srcset", "").split(",") if part.strip()]

    def handle_endtag(self, tag: str) -> None:
        """Leave a <style> block."""
        self._in_style = False

    def handle_data(self, data: str) -> None:
        """Keep the text of <style> blocks as CSS."""
        if self._in_style:
            self.css.append(data)


def css_refs(css: str) -> list[str]:
    """The url(...) and @import references of a CSS text."""
    return [next(group for group in match.groups() if group is not None) for match in CSS_REF.finditer(css)]


def resolve(ref: str, base: Path, root: Path) -> tuple[Path | None, str | None]:
    """The local file a reference from folder `base` loads (None for data: URLs and #fragments), or why it is not
    a file inside `root`: external (http(s)://, protocol-relative //host, any other scheme), outside, or missing."""
    parts = urlsplit(ref.strip())
    if parts.scheme == "data" or (not parts.scheme and not parts.netloc and not parts.path):
        return None, None
    if parts.scheme or parts.netloc:
        return None, "external"
    target = (base / unquote(parts.path)).resolve()
    if not target.is_relative_to(root):
        return None, "outside the build folder"
    return (target, None) if target.exists() else (None, "missing")


def offline_problems(html_dir: Path) -> list[str]:
    """Every reference in the built book that needs the network or a file outside `html_dir`, and every page with
    math that does not load a local MathJax (with its CHTML fonts next to it); empty when the book works offline."""
    root = html_dir.resolve()
    problems: list[str] = []
    for css_file in sorted(root.rglob("*.css")):
        for ref in css_refs(css_file.read_text(encoding="utf-8", errors="replace")):
            if (why := resolve(ref, css_file.parent, root)[1]) is not None:
                problems.append(f"{css_file.relative_to(root)}: {why} url({ref})")
    for page_file in sorted(root.rglob("*.html")):
        if page_file.relative_to(root).parts[0] == "_static":  # the themes' Jinja macro templates, not pages
            continue
        page = PageRefs()
        page.feed(page_file.read_text(encoding="utf-8", errors="replace"))
        name = page_file.relative_to(root)
        for ref in page.resources + [ref for css in page.css for ref in css_refs(css)]:
            if (why := resolve(ref, page_file.parent, root)[1]) is not None:
                problems.append(f"{name}: {why} {ref}")
        mathjax = [
            script
            for src in page.scripts
            if "mathjax" in src.lower() and (script := resolve(src, page_file.parent, root)[0]) is not None
        ]
        if page.has_math and not mathjax:
            problems.append(f"{name}: math but no local MathJax script")
        problems += [
            f"{name}: {script.relative_to(root)} without its fonts folder output/chtml/fonts"
            for script in mathjax
            if "chtml" in script.name and not (script.parent / "output" / "chtml" / "fonts").is_dir()
        ]
    return problems


def main(argv: list[str]) -> int:
    """Check the build folder named in argv (default _build/html): print each problem and return 1 if any."""
    html_dir = Path(argv[0] if argv else "_build/html")
    if not html_dir.is_dir():
        print(f"no built book at {html_dir}", file=sys.stderr)
        return 1
    problems = offline_problems(html_dir)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{html_dir}: {len(problems)} offline problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
