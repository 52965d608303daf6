"""The one file format of stored tensors (tensor-cache entries, saved steering vectors): a safetensors file whose
metadata holds one entry, a JSON header (keys sorted) with the sha256 of the header and every tensor in it. One
metadata entry, because safetensors writes its metadata map in an order that varies from process to process: with
one entry, the same tensors and header give the same bytes in every run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save

ENTRY = "llmaudit"  # the one metadata entry


class Unsealed(ValueError):
    """A stored file that cannot be trusted; its message says what is wrong with it ('fails its checksum')."""


def tensors_sha256(tensors: dict[str, torch.Tensor], header: str = "") -> str:
    """sha256 over a header text and every tensor's name, dtype, shape and bytes, in name order: the checksum saved
    with the tensors, so that a damaged or altered file is never used."""
    h = hashlib.sha256(header.encode())
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        h.update(f"\0{name}\0{tensor.dtype}\0{list(tensor.shape)}\0".encode())
        data = tensor.reshape(-1).view(torch.uint8).numpy()
        h.update(data)  # type: ignore[arg-type]  # numpy declares ndarray's buffer protocol only for Python >= 3.12
    return h.hexdigest()


def _canonical(header: dict[str, Any]) -> str:
    """The header's JSON text with its keys sorted: equal headers, equal text."""
    return json.dumps(header, sort_keys=True)


def seal(tensors: dict[str, torch.Tensor], header: dict[str, Any]) -> bytes:
    """The file's bytes: `tensors` with `header` (JSON values, no 'sha256' key) and their checksum."""
    tensors = {name: tensor.contiguous() for name, tensor in tensors.items()}
    sealed = {**header, "sha256": tensors_sha256(tensors, _canonical(header))}
    return save(tensors, metadata={ENTRY: _canonical(sealed)})


def unseal(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors and header of a file `seal` wrote; an unreadable file, one without a header (another writer, an
    older version) or one that fails its checksum is an Unsealed error saying so."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            text = (handle.metadata() or {}).get(ENTRY)
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except (OSError, SafetensorError) as err:
        raise Unsealed(f"is unreadable ({' '.join(str(err).split())})") from None
    try:
        header = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("sha256"), str):
        raise Unsealed(f"has no {ENTRY} header (written by another program or an older version)")
    stored = header.pop("sha256")
    if stored != tensors_sha256(tensors, _canonical(header)):
        raise Unsealed("fails its checksum")
    return tensors, header
