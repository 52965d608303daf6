"""External data sets, pinned by manifest.json and read from a local mirror ($LLMAUDIT_DATA) or a download cache."""

from llmaudit.data.store import (
    data_dir,
    data_path,
    load_manifest,
    read_csv,
    read_json,
    read_jsonl,
    read_text,
    verify_all,
)

__all__ = [
    "data_dir",
    "data_path",
    "load_manifest",
    "read_csv",
    "read_json",
    "read_jsonl",
    "read_text",
    "verify_all",
]
