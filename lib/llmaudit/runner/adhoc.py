"""Auditing a model without writing a params file first: `llmaudit audit --model <hub id or folder>` takes a shipped
profile's sizes and settings, puts the model in its `model` section, checks the model's tokenizer before any chapter
runs, and runs the audit from the params it writes into the report folder, which is named after the model (as
lm-evaluation-harness names its output after `--model_args pretrained=...`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import ValidationError

from llmaudit.config import MAX_DEPTH, Params, ParamsFile, located, one_line, params_path, parse_yaml, read_profile
from llmaudit.errors import AuditError, ConfigError
from llmaudit.paths import REPO
from llmaudit.registry import CHAPTERS, chapter
from llmaudit.runner.audit import audit
from llmaudit.terminal import clipped

PROFILES = {"paper": "llama-3.1-8b-instruct", "default": "smollm2-135m-instruct", "ci": "ci"}  # --profile: params
PARAMS_FILE = "params.yaml"  # in the report folder of an audit of --model: the params it ran with
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")  # 'name' or 'org/name'
PLACEMENT = ("dtype", "device", "device_map")  # what the profile's model section keeps for the audited model


def report_name(model: str) -> str:
    """The report folder's name for `model`: a local folder's own name, a hub id with '/' as '__' (the rule of
    lm-evaluation-harness); characters a report folder's name may not hold become '-'."""
    name = Path(model).resolve().name if Path(model).exists() else model.replace("/", "__")
    return re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip(".")[:100] or "model"


def model_source(model: str) -> dict[str, str]:
    """The params' source of `model`: {'path': folder} for a folder on disk (as transformers, before the hub), else
    {'hf': id} for a hub id; anything else is a one-line ConfigError."""
    folder = Path(model)
    if folder.exists():
        if not (folder / "config.json").is_file():
            raise ConfigError(f"--model {clipped(model)}: not a model folder (no config.json): give a folder that "
                              "save_pretrained wrote, or a hub id such as Qwen/Qwen3-8B")
        return {"path": str(folder.resolve())}
    if not HUB_ID.fullmatch(model):
        raise ConfigError(f"--model {clipped(model)}: no such folder, nor a hub id (org/name): give a model folder "
                          "or a hub id such as Qwen/Qwen3-8B")
    return {"hf": model}


def override(params: dict[str, Any], setting: str) -> None:
    """Apply one `--set KEY=VALUE` to the params: KEY a dotted path (tasks.sizes.credit), VALUE read as YAML as a
    params file is read (`config.parse_yaml`: no aliases, nesting and scalars bounded)."""
    key, sep, value = setting.partition("=")
    where = f"--set {clipped(setting)}"
    if not sep or not key:
        raise ConfigError(f"{where}: give KEY=VALUE, e.g. --set model.chat_template=false")
    *sections, last = key.split(".")
    if len(sections) >= MAX_DEPTH:
        raise ConfigError(f"{where}: the key is nested deeper than {MAX_DEPTH} levels")
    node = params
    for section in sections:
        node = node.setdefault(section, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{where}: '{clipped(section)}' is a value, not a section of the params")
    node[last] = parse_yaml(value.encode("utf-8", "surrogateescape"), where)  # argv's undecodable bytes as they were


@dataclass(frozen=True)
class Served:
    """`--endpoint URL`: the model is queried at this OpenAI-compatible server, with the API key in the environment
    variable `api_key_env` (None: none), its tokenizer and chat template from `tokenizer` (None: the model's name; on
    the chat route, none), on `route` (`models.endpoint.routes`)."""

    url: str
    api_key_env: str | None = None
    tokenizer: str | None = None
    route: str = "completions"

    def model_section(self, model: str) -> dict[str, Any]:
        """The params' model section: the tokenizer's source, the endpoint, the model's name there, the key's
        variable."""
        if not self.url.startswith(("http://", "https://")) or not urlsplit(self.url).hostname:
            raise ConfigError(f"--endpoint {clipped(self.url)}: give the server's http:// or https:// address, e.g. "
                              "http://localhost:8000")
        source = {} if self.route == "chat" and self.tokenizer is None else model_source(self.tokenizer or model)
        return {**source, "endpoint": self.url, "served": model, "route": self.route} | (
            {"api_key_env": self.api_key_env} if self.api_key_env else {})

    def name(self, model: str) -> str:
        """The report folder's name: the model's and the server's host, e.g. 'Qwen__Qwen3-8B-at-localhost-8000'."""
        where = urlsplit(self.url)
        return report_name(f"{model.replace('/', '__')}-at-{where.hostname}-{where.port or where.scheme}")


def built_params(model: str, *, profile: str = "default", device: str | None = None, name: str | None = None,
                 settings: Sequence[str] = (), served: Served | None = None) -> dict[str, Any]:
    """The shipped `profile`'s params for `model`: named `name` (default: after the model, and the host it is
    served from), its model section the model with the profile's dtype and device (`device` if given), or the
    endpoint that serves it (every chapter runs what the endpoint allows, `runner.needs`), each chapter's section as
    another model's audit reads it (`ChapterSpec.reused`: no other audit to compare with); then each `--set` in
    order."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile '{clipped(profile)}' (known: {', '.join(PROFILES)})")
    params = read_profile(PROFILES[profile])
    placed = {key: value for key, value in params.get("model", {}).items() if key in PLACEMENT}
    if served is None:
        params["name"] = report_name(model) if name is None else name
        params["model"] = {**model_source(model), **placed, **({"device": device} if device else {})}
    else:
        params["name"] = served.name(model) if name is None else name
        params["model"] = served.model_section(model)
    for spec in CHAPTERS:
        section = params.get(spec.section or "")
        if spec.reused is not None and spec.section and isinstance(section, dict):
            params[spec.section] = spec.reused(section)
    for setting in settings:
        override(params, setting)
    return params


def check_tokenizer(model: str, params: Params, chapters: Sequence[str]) -> None:
    """Stop before any chapter runs, with one line saying what to set, when the model's tokenizer has no chat
    template (the params expect one) or gives two answer words of a task the chapters run one first token; on an
    endpoint's chat route the server's template applies and answer words are matched by spelling: nothing to check."""
    if params.model.route == "chat":
        return
    tokenizer = _tokenizer(model, params)
    if params.model.chat_template and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"--model {clipped(model)}: its tokenizer has no chat template: audit it as a base model "
                          "(prompts as plain text) with --set model.chat_template=false")
    template = getattr(tokenizer, "chat_template", None) or ""
    if params.model.chat_template and "enable_thinking" in template \
            and "enable_thinking" not in params.model.template_options:
        raise ConfigError(f"--model {clipped(model)}: its chat template can open a thinking block before the answer, "
                          "which the next-token readings would score: add --set "
                          "model.template_options.enable_thinking=false")
    read = {name for key in chapters for name in (chapter(key).section, *chapter(key).reads)}
    for spec in CHAPTERS:
        problem = spec.answers(tokenizer, params) if spec.answers and spec.section in read else ""
        if problem:
            raise ConfigError(f"--model {clipped(model)}: {problem}")


def _tokenizer(model: str, params: Params) -> Any:
    """The model's tokenizer alone (no weights); one that cannot be loaded is a one-line AuditError."""
    from transformers import AutoTokenizer

    spec = params.model
    try:
        return AutoTokenizer.from_pretrained(spec.path or spec.hf, trust_remote_code=spec.trust_remote_code)
    except (OSError, ValueError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AuditError(f"--model {clipped(model)}: cannot load its tokenizer ({clipped(reason)}): check the id, log "
                         "in for gated models, or give a local folder") from None


def _has_gpu() -> bool:
    """Whether torch sees a CUDA device."""
    import torch

    return torch.cuda.is_available()


def adhoc_run(model: str, *, profile: str = "default", device: str | None = None, name: str | None = None,
              settings: Sequence[str] = (), reports: Path = REPO / "reports", served: Served | None = None,
              ) -> ParamsFile:
    """The params of `model` (hub id or folder) at a shipped profile's sizes (`built_params`), validated, as the
    params file `reports`/<name>/params.yaml that its audit writes (and a dry run plans, writing nothing)."""
    raw = built_params(model, profile=profile, device=device, name=name, settings=settings, served=served)
    try:
        params = Params.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(one_line(err, f"--model {clipped(model)} --profile {profile}")) from None
    # --set data_dir: from here, as the params written keep it
    params = located(params, Path.cwd(), f"--model {clipped(model)}")
    if params.data_dir is not None:
        raw["data_dir"] = params.data_dir
    params_file = Path(reports).resolve() / params.name / PARAMS_FILE
    header = (f"# Written by `llmaudit audit --model`: the profile {params_path(PROFILES[profile]).name} for the "
              "model below; rerun it with `llmaudit audit <this file>`.\n")
    text = header + yaml.safe_dump(raw, sort_keys=False)
    return ParamsFile(params_file, text, hashlib.sha256(text.encode("utf-8")).hexdigest(), params)


def audit_model(model: str, *, profile: str = "default", device: str | None = None, name: str | None = None,
                settings: Sequence[str] = (), reports: Path = REPO / "reports", chapters: list[str] | None = None,
                served: Served | None = None, offline: bool = False) -> Path:
    """Audit `model` (hub id or folder) at a shipped profile's sizes into `reports`/<`name`, default: the model's
    name>, from the params written there as params.yaml (rerun them with `llmaudit audit <that file>`); returns the
    report path. `offline`: an endpoint's audit rebuilt from its request ledger, asking the server nothing."""
    run = adhoc_run(model, profile=profile, device=device, name=name, settings=settings, reports=reports,
                    served=served)
    params = run.params
    if params.model.device == "cuda" and not params.model.remote and not _has_gpu():  # a dry run plans for a card
        raise ConfigError(f"--model {clipped(model)}: the {profile} profile runs on cuda but torch sees no GPU: add "
                          "--device cpu")
    return audit(run, reports=reports, chapters=chapters, write=True, offline=offline,
                 check=lambda: check_tokenizer(model, params, chapters or params.chapters))
