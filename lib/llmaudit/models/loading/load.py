"""Load the model a params file names: the embedded GGUF (offline), a hub id, a local folder, or NDIF; a hub or
local model can be spread over the machine's devices (`device_map`, placed by accelerate)."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from llmaudit.errors import AuditError, ConfigError
from llmaudit.models.loading.architectures import input_device
from llmaudit.models.loading.embedded import converted_dir, file_sha256, join_parts, locate_gguf
from llmaudit.models.loading.planned import load_planned, planning
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.runtime import AuditModel

if TYPE_CHECKING:
    from llmaudit.models.endpoint.client import Endpoint

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CHECKSUMS = "llmaudit-checksums.json"  # in a converted folder: the GGUF's sha256 and the sha256 of each file written


def load_model(name: str, spec: ModelSpec) -> AuditModel:
    """Build the AuditModel for `spec`; every failure to reach weights is a one-line AuditError."""
    from nnsight import TransformersModel

    started = time.perf_counter()
    if (memory := planning()) is not None:
        if not (spec.embedded or spec.embedded_parts or spec.hf or spec.path):
            raise ConfigError(f"model {name}: a dry run counts tokens with the model's tokenizer: give its source "
                              "(model.hf or model.path; --tokenizer) on the chat route")
        folder, source = _source(spec)
        try:
            return load_planned(name, spec, memory, folder=folder, source=source, dtype=DTYPES[spec.dtype])
        except (OSError, ValueError) as err:
            raise _unreachable(folder, err, "a dry run needs the model's config and tokenizer: give model.path or a "
                                            "cached hub id") from None
    if spec.endpoint:
        return _endpoint(name, spec)
    if spec.remote:
        lm, hf = _remote(spec), None
        tokenizer = lm.tokenizer
        from nnsight import CONFIG

        weights = {"source": f"ndif:{spec.hf}", "sha256": None, "host": CONFIG.API.HOST}
        device = "cpu"
    else:
        hf, tokenizer, weights = _local(spec)
        lm = TransformersModel(hf, task="text-generation", tokenizer=tokenizer)
        device = str(input_device(hf)) if spec.device_map else spec.device
    provenance = {**weights, "load_seconds": round(time.perf_counter() - started, 2)}
    return AuditModel(
        name, lm, tokenizer, hf=hf, remote=spec.remote, system_prompt=spec.system_prompt,
        provenance=provenance, device=device, chat_template=spec.chat_template,
        template_options=spec.template_options,
    )


def _local(spec: ModelSpec):
    """HF model + tokenizer in eval mode, plus a description of where the weights came from. With `device_map` the
    model is placed by accelerate as it loads (blocks spread over the devices) and is not moved afterwards."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = DTYPES[spec.dtype]
    folder, source = _source(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=spec.trust_remote_code)
        hf = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, trust_remote_code=spec.trust_remote_code,
                                                  device_map=spec.device_map)
    except (OSError, ValueError) as err:
        raise _unreachable(folder, err, "check the id, log in for gated models, or set model.path to a local copy") \
            from None
    if spec.hf:  # a hub snapshot is pinned by its commit, which pins every weight file's sha256
        source["revision"] = getattr(hf.config, "_commit_hash", None)
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("model.device is cuda but torch sees no GPU: set device: cpu or install a CUDA build of "
                          "torch")
    if spec.device_map is None:
        hf.to(spec.device)  # type: ignore[arg-type]  # transformers types its @wraps(Module.to) as unbound
    hf.eval()
    return hf, tokenizer, source


def _source(spec: ModelSpec) -> tuple[str, dict[str, str | None]]:
    """The folder the model's files load from (an embedded GGUF's converted copy) and where they came from."""
    folder: str | None
    source: dict[str, str | None]
    if spec.embedded or spec.embedded_parts:
        if spec.embedded:
            gguf = locate_gguf(spec.embedded)
        else:
            assert spec.sha256 is not None  # ModelSpec requires the sha256 of embedded_parts
            gguf = join_parts(spec.embedded_parts, spec.sha256)
        folder, sha = _embedded_folder(gguf)
        source = {"source": f"embedded:{spec.embedded or ' + '.join(spec.embedded_parts)}", "sha256": sha}
    else:
        folder = spec.path or spec.hf
        assert folder is not None  # ModelSpec requires exactly one source
        if spec.path and not (Path(spec.path) / "config.json").is_file():
            raise ConfigError(f"model path '{spec.path}' is not a folder with config.json and weights")
        source = {"source": folder, "sha256": _weights_sha256(Path(spec.path)) if spec.path else None}
    return folder, source


def _endpoint(name: str, spec: ModelSpec) -> AuditModel:
    """The model behind `spec.endpoint`, with the tokenizer and chat template of the params' source (no weights
    load: an embedded GGUF is converted once, as locally, for its tokenizer); on the chat route without a source,
    none (`models.endpoint.spellings` stands in)."""
    from transformers import AutoTokenizer

    from llmaudit.models.endpoint.model import EndpointModel

    tokenizer = None
    source: dict[str, str | None] = {"source": None, "sha256": None}
    if spec.embedded or spec.embedded_parts or spec.hf or spec.path:
        folder, source = _source(spec)
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=spec.trust_remote_code)
        except (OSError, ValueError) as err:
            raise _unreachable(folder, err, "the endpoint's model needs its tokenizer: give model.hf or model.path "
                               "(or none, on model.route: chat)") from None
    return EndpointModel(name, endpoint_of(name, spec), tokenizer, window=spec.logprobs,
                         provenance={"tokenizer": source["source"], "tokenizer_sha256": source["sha256"]},
                         system_prompt=spec.system_prompt, chat_template=spec.chat_template,
                         template_options=spec.template_options, min_coverage=spec.min_coverage,
                         max_samples=spec.max_samples)


def endpoint_of(name: str, spec: ModelSpec) -> Endpoint:
    """Where the model `name` of `spec` (one with an endpoint) is served, and how it is asked."""
    from llmaudit.models.endpoint.client import Endpoint

    return Endpoint(url=spec.endpoint or "", model=spec.served or spec.hf or name, api_key_env=spec.api_key_env,
                    timeout=spec.timeout, retries=spec.retries, concurrency=spec.concurrency, route=spec.route)


def _weights_sha256(folder: Path) -> str:
    """One sha256 over the sha256 of every weights file in a local model folder, in name order."""
    files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf"))
    return hashlib.sha256("".join(f"{p.name}:{file_sha256(p)}\n" for p in files).encode()).hexdigest()


def _embedded_folder(gguf: Path) -> tuple[str, str]:
    """Folder of the dequantised copy of a packaged GGUF, converting it on first use (~25 s, then ~2 s), and the
    GGUF's sha256. The copy is checked on every load against the checksums recorded when it was converted, so that
    the weights loaded are those the GGUF's sha256 (the model's identity in cache keys and the model card) names; a
    damaged or altered copy is converted again, with a warning."""
    sha = file_sha256(gguf)
    target = converted_dir(gguf, sha)
    if not target.exists():
        _convert(gguf, sha, target)
    elif problem := _conversion_problem(target, sha):
        warnings.warn(f"converted weights {target} {problem}: converting {gguf} again", stacklevel=2)
        _convert(gguf, sha, target)
    return str(target), sha


def _file_checksums(folder: Path) -> dict[str, str]:
    """sha256 of every file of a converted folder but the checksum file, by name."""
    return {p.name: file_sha256(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != CHECKSUMS}


def _conversion_problem(target: Path, sha: str) -> str | None:
    """Why a converted folder cannot be used (no readable checksums, or files that differ from them), or None."""
    try:
        recorded = json.loads((target / CHECKSUMS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"have no readable checksums ({' '.join(str(err).split())})"
    if recorded != {"gguf_sha256": sha, "files": _file_checksums(target)}:
        return "differ from the checksums recorded at their conversion"
    return None


def _convert(gguf: Path, sha: str, target: Path) -> None:
    """Dequantise a GGUF into `target` (replacing any earlier copy) with the checksums of the files written; the
    copy is built aside and moved in whole, so a failed conversion leaves no partial folder under the target's name."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    hf = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    hf.hf_quantizer = None  # type: ignore[assignment]  # transformers leaves the attribute to Module.__getattr__
    if hasattr(hf.config, "quantization_config"):
        del hf.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=f"{target.name}.partial-"))
    try:
        hf.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        checksums = {"gguf_sha256": sha, "files": _file_checksums(partial)}
        (partial / CHECKSUMS).write_text(json.dumps(checksums, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _remote(spec: ModelSpec):
    """An nnsight model whose traces run on NDIF (`model.host`, else NDIF's public service)."""
    from llmaudit.models.loading.remote import connect

    assert spec.hf is not None  # ModelSpec requires an hf id for remote: true
    try:
        return connect(spec.hf, spec.host)
    except OSError as err:
        raise _unreachable(spec.hf, err, "the remote model's config and tokenizer come from the hub over the "
                                         "network, or from its local cache with HF_HUB_OFFLINE=1") from None


def _unreachable(source: str, err: Exception, advice: str) -> AuditError:
    """One-line error for weights that could not be loaded, keeping the first line of the library's reason."""
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return AuditError(f"cannot load model '{source}' ({reason}): {advice}")
