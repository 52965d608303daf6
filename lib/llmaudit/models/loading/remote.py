"""The NDIF client side of `remote: true`: which server the traces go to, the model's meta copy that nnsight traces
against, and every remote failure turned into one line that says which of the usual five it is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from llmaudit.errors import AuditError, ConfigError

PUBLIC_HOST = "https://api.ndif.us"  # NDIF's public service, nnsight's default host


def connect(hf: str, host: str | None):
    """The nnsight model whose traces run on the NDIF server at `host` (None: nnsight's configured host, NDIF's
    public service unless NDIF_HOST says otherwise). Only the public service needs an API key."""
    from nnsight import CONFIG, TransformersModel, register
    from transformers import AutoTokenizer

    import llmaudit

    # the traces call the audit's own functions (the steering edit, the hidden-state accessors), which the server
    # does not have installed: nnsight ships their source with each request
    register(llmaudit)
    CONFIG.APP.REMOTE_LOGGING = False  # a status line per request would fill the chapters' output: they show progress
    if host is not None:
        CONFIG.API.HOST = host
    if CONFIG.API.HOST.rstrip("/") == PUBLIC_HOST and not CONFIG.API.APIKEY:
        raise ConfigError(
            "remote: true needs an NDIF API key: run nnsight.CONFIG.set_default_api_key('<key>') once (see nnsight.net)"
        )
    _name_offline(hf)
    # the pipeline nnsight builds around the meta model cannot guess a tokenizer for a bare id: hand it one
    return TransformersModel(hf, task="text-generation", tokenizer=AutoTokenizer.from_pretrained(hf))


def _name_offline(hf: str) -> None:
    """nnsight names a remote model by the id the hub spells it with, asking the hub once; with the hub offline (a
    local server serving a local cache) the id is taken as written."""
    from huggingface_hub import constants
    from nnsight.modeling import huggingface

    if constants.HF_HUB_OFFLINE:
        huggingface._ID_CACHE.setdefault(hf, hf)


@contextmanager
def failures_as_one_line(model: str) -> Iterator[None]:
    """Run a remote trace, turning its failure into one AuditError line naming the server and what went wrong."""
    from nnsight import CONFIG

    try:
        yield
    except AuditError:
        raise
    except Exception as err:
        kind = failure_kind(err)
        if kind is None:
            raise
        raise AuditError(f"NDIF at {CONFIG.API.HOST}, model {model}: {kind} ({_first_line(err)})") from None


def failure_kind(err: BaseException) -> str | None:
    """Which remote failure `err` is, as advice to the user; None for an error that is not a remote one."""
    import httpx
    from nnsight.intervention.backends.remote import RemoteError
    from websocket import WebSocketException

    text = str(err)
    if isinstance(err, (httpx.TimeoutException, TimeoutError)) or "timed out" in text.lower():
        return "timed out: the server or the network is slow; rerun (finished passes are cached)"
    if isinstance(err, (ConnectionError, httpx.ConnectError)) or "connection refused" in text.lower():
        return "server down or unreachable: start it (scripts/ndif/ndif.sh start) or check model.host"
    if not isinstance(err, (RemoteError, WebSocketException, httpx.HTTPError, OSError)):
        return None
    lowered = text.lower()
    if any(s in lowered for s in ("401", "403", "api key")):
        return "API key refused: set a valid key with nnsight.CONFIG.set_default_api_key('<key>')"
    if "413" in lowered or "too large" in lowered:
        return "request too large: lower batch_tokens in the params file"
    if "could not read" in lowered and "from the hub" in lowered:  # NDIF sizes a model it has not deployed
        return ("deployment has no size: the server sizes a model it has not deployed from the Hugging Face Hub, "
                "which it cannot reach; deploy it there with size_bytes (scripts/ndif/README.md)")
    if "could not deploy" in lowered or "not deployed" in lowered:
        return "model not deployed on this server: deploy it there, or name a model it serves"
    return "remote trace failed"


def _first_line(err: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
