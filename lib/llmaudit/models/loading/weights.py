"""A local model folder checked before any chapter loads it: its config.json read as report files are read (a regular
file, bounded in size and nesting, a JSON mapping), a weights file transformers loads from a folder, every shard a
sharded checkpoint's index names, and the shape of each stored tensor against the model the config describes (built
on the meta device: no memory used, no tensor read). Each problem is a one-line ConfigError naming the file; the
tensors are loaded only when a chapter loads the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmaudit.errors import ConfigError
from llmaudit.reading import read_json
from llmaudit.terminal import clipped

CONFIG_LIMIT = 16 * 2**20  # bytes of a config.json or a shard index: far above any real one (Llama 3.1 8B's: 1 kB)
# The weights files transformers loads from a folder, in the order it looks for them (`modeling_utils`
# `_get_resolved_checkpoint_files`); the two indexes name a sharded checkpoint's files in their weight_map.
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
FIX = "give the folder save_pretrained wrote the model to"


def check_folder(folder: Path, *, trust_remote_code: bool = False) -> None:
    """Stop with one line, before any chapter, where `folder` lacks a readable config.json or weights, or where a
    stored tensor's shape is not the one its config describes (a folder of custom code, `trust_remote_code`, or of
    quantized weights is not built: its weights are only found)."""
    config = read_config(folder)
    stored = stored_shapes(folder)
    if trust_remote_code or not stored or "quantization_config" in config:  # pickled weights' shapes are read only
        return  # by loading them, and quantized ones are stored packed, in shapes of their own
    prefix, described = described_shapes(folder, len(stored))
    held = {name.removeprefix(prefix): (name, shape) for name, shape in stored.items()}  # a base model's checkpoint
    common = [name for name in described if name.removeprefix(prefix) in held]  # names its tensors without prefix
    if not common:
        raise ConfigError(f"model folder {clipped(folder)}: its weights hold none of the {len(described)} tensors "
                          f"its config.json describes (e.g. {clipped(next(iter(described), ''))}): {FIX}")
    for name in common:
        (key, shape), expected = held[name.removeprefix(prefix)], described[name]
        if shape != expected:
            raise ConfigError(f"model folder {clipped(folder)}: {clipped(key)} is {shape} in the weights but "
                              f"{expected} by config.json: give the config.json saved with these weights")


def read_config(folder: Path) -> dict[str, Any]:
    """A model folder's config.json as a mapping, read within the bounds report files are read in."""
    path = Path(folder) / "config.json"
    try:
        config = read_json(path, FIX, CONFIG_LIMIT)
    except FileNotFoundError:
        raise ConfigError(f"model folder {clipped(folder)} has no config.json: {FIX}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{clipped(path)} is not a mapping of settings (a JSON object): {FIX}")
    return config


def stored_shapes(folder: Path) -> dict[str, list[int]]:
    """The shape of every tensor of a folder's safetensors weights, by name; none for pickled weights. Missing
    weights, a missing shard or a damaged header is a ConfigError."""
    found = next((name for name in WEIGHTS if (Path(folder) / name).is_file()), None)
    if found is None:
        raise ConfigError(f"model folder {clipped(folder)} holds no weights (no {', '.join(WEIGHTS[:-1])} or "
                          f"{WEIGHTS[-1]}): {FIX}")
    files = _shards(Path(folder) / found) if found.endswith(".index.json") else [Path(folder) / found]
    if not found.startswith("model.safetensors"):
        return {}
    from safetensors import SafetensorError, safe_open

    shapes: dict[str, list[int]] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="pt") as weights:
                shapes |= {key: list(weights.get_slice(key).get_shape()) for key in weights.keys()}
        except (SafetensorError, OSError) as err:
            raise ConfigError(f"weights file {clipped(path)} is damaged ({clipped(err)}): copy it again") from None
    return shapes


def _shards(index: Path) -> list[Path]:
    """The files a sharded checkpoint's index names, each a file of the index's folder; any other is a ConfigError."""
    weight_map = read_json(index, FIX, CONFIG_LIMIT)
    weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(name, str) for name in weight_map.values()):
        raise ConfigError(f"{clipped(index)} has no weight_map of tensor names to shard files: {FIX}")
    shards = []
    for name in dict.fromkeys(weight_map.values()):
        if Path(name).name != name or name in {"", ".", ".."} or not (index.parent / name).is_file():
            raise ConfigError(f"{clipped(index)} names the shard {clipped(name)}, which is no file of that folder: "
                              "copy every shard of the checkpoint")
        shards.append(index.parent / name)
    return shards


def described_shapes(folder: Path, tensors: int) -> tuple[str, dict[str, list[int]]]:
    """The base model's prefix ('model.' in a Llama) and the shape of every tensor of the model a folder's config
    describes, by name; built on the meta device, it takes no memory. A config transformers cannot build a model
    from, or of more blocks than the weights' `tensors` could hold, is a ConfigError."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    where = clipped(Path(folder) / "config.json")
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # its warnings about a wrong config: this check says what is wrong in one line
    try:
        try:
            described = AutoConfig.from_pretrained(folder)
        except Exception as err:  # noqa: BLE001  # what transformers raises for a config it cannot use is of any type
            raise _unbuildable(where, err) from None
        blocks = getattr(described, "num_hidden_layers", None)
        if isinstance(blocks, int) and not 0 < blocks <= tensors:  # a billion blocks would take hours, even on meta
            raise ConfigError(f"{where} describes {blocks} blocks, where the {tensors} tensors of its weights hold "
                              "at least one and at most that many: give the config.json saved with the weights")
        try:
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(described)
        except Exception as err:  # noqa: BLE001
            raise _unbuildable(where, err) from None
    finally:
        logging.set_verbosity(verbosity)
    prefix = f"{model.base_model_prefix}." if model.base_model_prefix else ""
    return prefix, {name: list(tensor.shape) for name, tensor in model.state_dict().items()}


def _unbuildable(where: str, err: Exception) -> ConfigError:
    """The one line for a config.json transformers cannot build a model from, with its reason."""
    reason = clipped(" ".join(str(err).split()) or type(err).__name__)
    return ConfigError(f"{where}: transformers cannot build the model it describes ({type(err).__name__}: {reason}): "
                       "give the config.json saved with the weights")
