"""Load the external data sets the audit uses, by manifest key, from a local mirror or a download cache.

The files are never committed: manifest.json pins each one (upstream URL at a commit, sha256,
licence, table columns) and every file is checked against its sha256 before it is read.
"""

import csv
import difflib
import functools
import hashlib
import http.client
import json
import os
import re
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llmaudit.cache import cache_root
from llmaudit.errors import DataError

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
DATA_ENV = "LLMAUDIT_DATA"
DOWNLOAD_TIMEOUT_S = 60

Manifest = Mapping[str, Mapping[str, Any]]


def _fail(message: str) -> DataError:
    """A DataError whose message is forced onto one line."""
    return DataError(re.sub(r"\s*[\r\n]+\s*", " ", message))


@functools.cache
def load_manifest() -> dict[str, dict[str, Any]]:
    """The shipped manifest: mirror-relative key -> url, sha256, licence, columns."""
    return json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))


def data_dir(explicit: str | Path | None = None) -> Path | None:
    """The mirror dir: `explicit` if given, else env var LLMAUDIT_DATA, else None."""
    chosen = explicit if explicit is not None else os.environ.get(DATA_ENV) or None
    return Path(chosen).expanduser() if chosen is not None else None


def _cache_dir() -> Path:
    """Where downloads land: the user cache's data folder."""
    return cache_root() / "data"


def _entry(key: str, manifest: Manifest) -> Mapping[str, Any]:
    """The manifest entry for `key`, or a DataError suggesting close matches and the folder's files."""
    if key in manifest:
        return manifest[key]
    message = f"unknown data file {key!r}"
    close = difflib.get_close_matches(key, list(manifest), n=3, cutoff=0.6)
    if close:
        message += f" (did you mean {', '.join(map(repr, close))}?)"
    top = key.split("/", 1)[0] + "/"
    siblings = [k.removeprefix(top) for k in manifest if k.startswith(top)]
    if siblings:
        message += f"; known files under {top!r}: {', '.join(siblings)}"
    else:
        message += f"; known folders: {', '.join(sorted({k.split('/', 1)[0] + '/' for k in manifest}))}"
    raise _fail(message)


@functools.cache
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """Hex sha256 of a file; cached per (path, size, mtime) so each file is hashed once per process."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _verified(path: Path, key: str, entry: Mapping[str, Any]) -> Path:
    """Return `path` if its sha256 matches the manifest, else raise a one-line DataError."""
    stat = path.stat()
    got = _sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if got != entry["sha256"]:
        raise _fail(
            f"{key} at {path}: sha256 mismatch (expected {entry['sha256']}, got {got}): "
            "the file is corrupt or a different version; re-download it or fix the mirror"
        )
    return path


def _download(key: str, entry: Mapping[str, Any], dest: Path, where: str) -> Path:
    """Fetch `key` from its pinned URL into `dest` (temp file, sha256 check, then rename)."""
    url = entry.get("url")
    if not url:
        raise _fail(
            f"{key} not found {where} and it cannot be downloaded (it comes from {entry.get('source', 'no URL')}): "
            f"set {DATA_ENV} to a local mirror that holds it (see README)"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".part")
    try:
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
                while chunk := response.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
        except (OSError, http.client.HTTPException) as err:
            raise _fail(
                f"{key} not found {where} and download failed ({type(err).__name__}: {err}): "
                f"set {DATA_ENV} to a mirror of the upstream data (see README) or go online"
            ) from err
        if digest.hexdigest() != entry["sha256"]:
            raise _fail(
                f"{key} downloaded from {url}: sha256 mismatch (expected {entry['sha256']}, got {digest.hexdigest()}): "
                f"upstream changed or the download was corrupted; retry, or set {DATA_ENV} to a verified mirror"
            )
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def data_path(key: str, mirror: str | Path | None = None, *, manifest: Manifest | None = None) -> Path:
    """Resolve a manifest key to a verified local file: the mirror if it has it, else the cache (downloading); a mirror
    whose entry is there but no regular file (a folder, a broken link) stops, never switching to the network."""
    manifest = load_manifest() if manifest is None else manifest
    entry = _entry(key, manifest)
    root = data_dir(mirror)
    if root is not None and (root / key).is_file():
        return _verified(root / key, key, entry)
    if root is not None and os.path.lexists(root / key):  # a folder, a dangling link or a loop: a broken mirror
        raise _fail(f"{key} in mirror {root} is not a readable file: restore it from the upstream data (see README), "
                    f"or unset {DATA_ENV}")
    cached = _cache_dir() / key
    if cached.is_file():
        return _verified(cached, key, entry)
    where = f"in mirror {root}" if root is not None else f"in cache {cached.parent} (no mirror: {DATA_ENV} unset)"
    return _download(key, entry, cached, where)


def _sep(key: str) -> str:
    """Field separator for a table, from its suffix."""
    return "\t" if key.endswith(".tsv") else ","


def _check_columns(path: Path, key: str, entry: Mapping[str, Any], sep: str) -> None:
    """Raise a one-line DataError unless the file's first record matches the manifest's columns."""
    expected = list(entry.get("columns", []))
    if not expected:
        return
    with path.open(newline="", encoding="utf-8") as f:
        first = next(csv.reader(f, delimiter=sep), [])
    if entry.get("header", True) is False:
        if len(first) != len(expected):
            raise _fail(f"{key}: expected {len(expected)} fields per row {expected}, got {len(first)}; fix the mirror")
        return
    if first == expected:
        return
    missing = [c for c in expected if c not in first]
    unexpected = [c for c in first if c not in expected]
    detail = (
        f"missing columns {missing}, unexpected columns {unexpected}"
        if missing or unexpected
        else f"columns in a different order: got {first}, expected {expected}"
    )
    raise _fail(f"{key}: header does not match the manifest ({detail}): the file is a different version; "
                "fix the mirror")


def read_csv(
    key: str, mirror: str | Path | None = None, *, manifest: Manifest | None = None, **kw: Any
) -> pd.DataFrame:
    """Read a CSV/TSV data file (sep from the suffix) after checking its header against the manifest."""
    manifest = load_manifest() if manifest is None else manifest
    path = data_path(key, mirror, manifest=manifest)
    entry = manifest[key]
    kw.setdefault("sep", _sep(key))
    _check_columns(path, key, entry, kw["sep"])
    if entry.get("header", True) is False:
        kw.setdefault("header", None)
        kw.setdefault("names", list(entry["columns"]))
    return pd.read_csv(path, **kw)


def read_json(key: str, mirror: str | Path | None = None, *, manifest: Manifest | None = None) -> Any:
    """Parse a JSON data file."""
    return json.loads(read_text(key, mirror, manifest=manifest))


def read_jsonl(key: str, mirror: str | Path | None = None, *, manifest: Manifest | None = None) -> list[dict]:
    """Parse a JSON-lines data file into one dict per non-blank line."""
    return [json.loads(line) for line in read_text(key, mirror, manifest=manifest).splitlines() if line.strip()]


def read_text(key: str, mirror: str | Path | None = None, *, manifest: Manifest | None = None) -> str:
    """Read a data file as UTF-8 text (newlines normalised to \\n)."""
    return data_path(key, mirror, manifest=manifest).read_text(encoding="utf-8")


def verify_all(mirror: str | Path | None = None, *, manifest: Manifest | None = None) -> list[str]:
    """Check every manifest file in the mirror (present, sha256, table header); return one line per problem."""
    manifest = load_manifest() if manifest is None else manifest
    root = data_dir(mirror)
    if root is None:
        raise _fail(f"no data mirror to verify: pass a directory or set {DATA_ENV}")
    problems = []
    for key, entry in manifest.items():
        path = root / key
        if not path.is_file():
            problems.append(f"{key}: missing from mirror {root}")
            continue
        try:
            _verified(path, key, entry)
            if key.endswith((".csv", ".tsv")):
                _check_columns(path, key, entry, _sep(key))
        except DataError as err:
            problems.append(str(err))
    return problems
