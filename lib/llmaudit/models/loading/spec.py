"""The params file's `model` section: where the weights come from and how they are placed."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import field_validator, model_validator

from llmaudit.errors import ConfigError
from llmaudit.sections import Section

PACKAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a top-level module name: finding it imports nothing
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's placement strategies


class ModelSpec(Section):
    """Exactly one of `embedded` (a packaged GGUF), `embedded_parts` (a GGUF split over several packages, joined in
    order and checked against `sha256`), `hf` (hub id) or `path`. Base models without a chat template set
    `chat_template: false` and read prompts as plain text; `template_options` go to the chat template as its keyword
    arguments (Qwen3: `enable_thinking: false`, so that the answer follows the assistant tag). `device_map` spreads a
    model too large for one GPU over the machine's GPUs (accelerate); past one machine, `remote: true` runs it on NDIF
    through nnsight, on the server at `host` (NDIF's public service when unset). With `endpoint` the model is queried
    over an OpenAI-compatible API (`models.endpoint`) and the source gives only its tokenizer and chat template; on
    `route: chat` (a server with only `/v1/chat/completions`) the server's template applies and the source, used only
    to count tokens, may be left out."""

    embedded: str | None = None
    embedded_parts: list[str] = []
    sha256: str | None = None
    chat_template: bool = True
    template_options: dict[str, bool | int | str] = {}
    hf: str | None = None
    path: str | None = None
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: Literal["cpu", "cuda"] = "cpu"
    device_map: Literal[DEVICE_MAPS] | None = None  # type: ignore[valid-type]
    remote: bool = False
    host: str | None = None  # the NDIF server's address for remote: true (default: NDIF's public service)
    trust_remote_code: bool = False
    system_prompt: str | None = None
    endpoint: str | None = None  # an OpenAI-compatible server's URL, where the model is queried
    served: str | None = None  # the model's name on that server (default: the hf id)
    api_key_env: str | None = None  # the environment variable holding the endpoint's API key (None: no key)
    # completions: prompts rendered here in the model's template (the default, where the server has the route); chat:
    # the prompts' turns sent as messages to /v1/chat/completions (hosted APIs), the server's template applied
    route: Literal["completions", "chat"] = "completions"
    logprobs: int = 20  # the log-probabilities per token asked of the endpoint (its window; 20: hosted APIs' limit)
    timeout: float = 60.0  # seconds one request to the endpoint may take
    retries: int = 5  # retries of a request the endpoint failed (429, 5xx, timeouts), with backoff
    # requests in flight at once (a thread pool; each retries on its own, honouring Retry-After): 8 stays within
    # hosted APIs' usual per-key limits; a vLLM or SGLang server batches far more, so raise it there
    concurrency: int = 8
    # the least answer-word coverage of a top-k read (`models.endpoint.modes`) for its test to be measurable: a case's
    # metric is off by at most 1 - coverage, a gap by twice that, so 0.995 keeps a gap within half epsilon.gap's 0.02
    min_coverage: float = 0.995
    # the most sampled answers per prompt where the endpoint gives no log-probabilities (sampled mode); the count
    # is set from the test's margin (`chapters.decision_tasks.sampled`), at least the main paper's five
    max_samples: int = 100

    @field_validator("embedded")
    @classmethod
    def _inside_package(cls, value: str | None) -> str | None:
        if value is not None:
            _relative(value)
        return value

    @field_validator("embedded_parts")
    @classmethod
    def _parts_inside_packages(cls, value: list[str]) -> list[str]:
        for part in value:
            _relative(part)
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        sources = [s for s in ("embedded", "embedded_parts", "hf", "path") if getattr(self, s)]
        if len(sources) > 1 or not (sources or self.endpoint and self.route == "chat"):
            raise ValueError(f"set exactly one of embedded, embedded_parts, hf or path (got {sources or 'none'}; an "
                             "endpoint on route: chat needs none)")
        if self.embedded_parts and not self.sha256:
            raise ValueError("embedded_parts needs the sha256 of the joined file")
        if self.remote and not self.hf:
            raise ValueError("remote: true needs an hf id (NDIF serves hub models)")
        if self.host is not None and not (self.remote and self.host.startswith(("http://", "https://"))):
            raise ValueError("host is the NDIF server's http:// or https:// address, for remote: true only")
        if self.endpoint is not None and (self.remote or self.device_map
                                          or not self.endpoint.startswith(("http://", "https://"))):
            raise ValueError("endpoint is an http:// or https:// server address, without remote or device_map")
        if self.endpoint is None and (self.served or self.api_key_env or self.route != "completions"):
            raise ValueError("served, api_key_env and route go with endpoint")
        if not (1 <= self.logprobs <= 100_000 and self.timeout > 0 and 0 <= self.retries <= 100
                and 0 <= self.min_coverage <= 1 and self.max_samples >= 5 and 1 <= self.concurrency <= 1024):
            raise ValueError("logprobs is in [1, 100000], timeout positive, retries in [0, 100], min_coverage in "
                             "[0, 1], max_samples at least 5, concurrency in [1, 1024]")
        if self.device_map and (self.embedded or self.embedded_parts or self.remote):
            raise ValueError("device_map places hub or local transformers weights: not embedded or remote models")
        return self


def _relative(spec: str) -> None:
    """ValueError unless `spec` names a file inside a package (see `embedded_file`)."""
    try:
        embedded_file(spec, "")
    except ConfigError as err:
        raise ValueError(str(err).removeprefix(": ")) from None


def embedded_file(spec: str, where: str) -> tuple[str, PurePosixPath]:
    """Split an embedded model file 'package/file inside it' into the package's module name and the file's path
    within the package; one-line error for anything that could name a file outside (an absolute path, '..')."""
    package, _, inner = spec.partition("/")
    segments = inner.split("/")
    if not PACKAGE.fullmatch(package) or any(s in {"", ".", ".."} or "\\" in s or "\0" in s for s in segments):
        raise ConfigError(f"{where}: give '<package>/<file inside that package>', a relative path without '..' "
                          f"(got {spec!r})")
    return package, PurePosixPath(inner)
