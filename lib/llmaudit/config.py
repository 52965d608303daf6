"""Params files: one YAML per audited model, read into the typed sections the registered chapters declare (plus the
model, the run's settings and the verdict page's gates). Every problem is a one-line ConfigError that names the key
and, for an unknown name, the closest known one."""

from __future__ import annotations

import difflib
import hashlib
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from llmaudit.errors import ConfigError
from llmaudit.models.loading.spec import ModelSpec
from llmaudit.models.memory import AUTO, BatchTokens
from llmaudit.paths import PARAMS_DIR, REPO, plain_name
from llmaudit.registry import CHAPTERS, KEYS, Sections
from llmaudit.sections import SEED_LIMIT, Section, at_least, known, once
from llmaudit.terminal import clipped
from llmaudit.verdict.gates import GateParams
from llmaudit.verdict.margins import EpsilonParams

MAX_DEPTH = 20  # nesting levels a params file may use (it needs 4)
# Keys of older params files and where they went.
MOVED: dict[tuple[str, ...], str] = {
    ("tasks", "epsilon"): "the margins have a section of their own, one per unit of score: epsilon: {slope: 0.02, "
                          "gap: 0.02, fpr_gap: 0.02}",
}
_SHORT = reprlib.Repr()  # reprlib's limits (6 items, 3 levels, 40-digit integers) bound the work a repr does

__all__ = ["REPO", "PARAMS_DIR", "Params", "ParamsFile", "available_models", "load_params", "params_path",
           "parse_yaml", "read_params_file", "read_profile", "standin_params"]


class RunSettings(Section):
    """The part of a params file that is not a chapter's: the model, the chapters to run (default: every registered
    chapter, in book order), the seed, the token budget of one forward batch (`auto`: planned from the device's free
    memory, `models.memory`), a local data mirror, the verdict page's gates and its margins (epsilon per unit)."""

    name: str
    model: ModelSpec
    chapters: list[str] = Field(default_factory=lambda: list(KEYS))
    seed: int = 0
    batch_tokens: BatchTokens = AUTO
    data_dir: str | None = None
    gates: GateParams = Field(default_factory=GateParams)
    epsilon: EpsilonParams = Field(default_factory=EpsilonParams)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return plain_name(value)

    @field_validator("chapters")
    @classmethod
    def _chapters(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"list at least one chapter (known: {', '.join(KEYS)})")
        for key in value:
            known(key, KEYS)
        return list(once(value))

    @field_validator("seed")
    @classmethod
    def _seed(cls, value: int) -> int:
        if not 0 <= value < SEED_LIMIT:
            raise ValueError(f"must be in [0, 2^32) (got {value})")
        return value

    @field_validator("batch_tokens")
    @classmethod
    def _batch(cls, value: BatchTokens) -> BatchTokens:
        return value if value == AUTO else at_least(value, 64)

    @model_validator(mode="after")
    def _complete(self) -> RunSettings:
        """Each section a chosen chapter runs with has what a run needs (`Section.complete`)."""
        for spec in CHAPTERS:
            if spec.key in self.chapters:
                for section in filter(None, (spec.section, *spec.reads)):
                    getattr(self, section).complete()
        return self


class Params(Sections, RunSettings):
    """Everything one audit run of one model needs: the run's settings, then each chapter's section (`Sections`)."""


def available_models() -> list[str]:
    """Names of the params files shipped in params/."""
    return sorted(p.stem for p in PARAMS_DIR.glob("*.yaml"))


def params_path(name_or_path: str | Path) -> Path:
    """Resolve a model name (params/<name>.yaml) or a path to a params file."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"}:
        if not path.exists():
            raise ConfigError(f"params file {clipped(path)} does not exist")
        if not path.is_file():  # a FIFO or device would block or stream forever once opened: never open one
            raise ConfigError(f"params file {clipped(path)} is not a regular file: give a YAML file")
        return path
    candidate = PARAMS_DIR / f"{name_or_path}.yaml"
    if not candidate.exists():
        known_names = available_models()
        close = difflib.get_close_matches(str(name_or_path), known_names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(f"unknown model '{clipped(name_or_path)}': {hint}known models: {', '.join(known_names)}")
    return candidate


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (plain YAML keeps the last), a
    scalar it cannot build (a date like 2024-13-45, an integer of 5000 digits) is a YAML error with its line, and
    aliases (whose nesting expands a few lines into billions of values) and nesting deeper than MAX_DEPTH (which
    would exhaust Python's stack) are refused with their line."""

    _depth = 0  # nodes being composed, one inside another

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed: write the value out",
                                              self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as err:
            raise yaml.constructor.ConstructorError(None, None, str(err), node.start_mark) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node, deep=deep)
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key '{key}', first given on line {first[key] + 1}", key_node.start_mark
                    )
                first[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path, data: bytes | None = None) -> Any:
    """A params file's YAML document (its bytes `data`, read from `path` where not given), read by the strict loader
    (`parse_yaml`)."""
    return parse_yaml(path.read_bytes() if data is None else data, clipped(path))


def parse_yaml(data: bytes, where: str) -> Any:
    """The YAML document `data` (from `where`: a params file, or a `--set` of the command line) read by the strict
    loader; a NUL byte, bad UTF-8 or bad YAML is a one-line ConfigError starting with `where`, with the line where
    there is one."""
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise ConfigError(f"{where} line {line}: a NUL byte: a params file is YAML text")
    try:
        return yaml.load(data.decode("utf-8"), Loader=_StrictLoader)
    except UnicodeDecodeError as err:
        raise ConfigError(f"{where}: not UTF-8 text (byte {err.start}): a params file is YAML text") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        raise ConfigError(f"{where}{at}: not valid YAML ({clipped(problem)})") from None


@dataclass(frozen=True)
class ParamsFile:
    """A params file as read once: its path, its text, the sha256 of its bytes and the params they give. An audit
    runs every chapter on this text and its model card records it, whatever happens to the file meanwhile."""

    path: Path
    text: str
    sha256: str
    params: Params


def read_params_file(name_or_path: str | Path) -> ParamsFile:
    """Read a params file once and validate it; every problem is a one-line ConfigError naming the key."""
    path = params_path(name_or_path)
    data = path.read_bytes()
    raw = _read_yaml(path, data)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    try:
        params = Params.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(one_line(err, path.name)) from None
    return ParamsFile(path, data.decode("utf-8"), hashlib.sha256(data).hexdigest(),
                      located(params, path.absolute().parent, path.name))  # a link's own folder: not followed


def load_params(name_or_path: str | Path) -> Params:
    """Read and validate a params file (`read_params_file`); a relative `model.path` or `data_dir` is taken from the
    params file's folder (`located`)."""
    return read_params_file(name_or_path).params


def located(params: Params, folder: Path, where: str) -> Params:
    """`params` with a relative `model.path` and `data_dir` taken from `folder` (a params file's, as a relative params
    path is taken from the current directory); a data_dir that is no folder is a ConfigError starting with `where`
    (the audit would download the data instead of reading the mirror named)."""
    model, data = params.model, params.data_dir
    if model.path is not None:
        model = model.model_copy(update={"path": str(folder / Path(model.path).expanduser())})
    if data is not None:
        data = str(folder / Path(data).expanduser())
        if not Path(data).is_dir():
            raise ConfigError(f"{where}:data_dir: {data} is not a folder: give the data mirror's folder (a relative "
                              f"one starts at {folder}), or leave data_dir out to download")
    return params.model_copy(update={"model": model, "data_dir": data})


def one_line(err: ValidationError, where: str) -> str:
    """The first problem pydantic found, as 'file:section:key: what is wrong (got value)'."""
    problem = err.errors(include_url=False)[0]
    loc = [clipped(part) for part in problem["loc"]]
    kind = problem["type"]
    if kind == "extra_forbidden":
        names = _fields(loc[:-1])
        close = difflib.get_close_matches(loc[-1], names, n=1)
        hint = MOVED.get(tuple(loc)) or (f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(names)}")
        return f"{':'.join([where, *loc[:-1]])}: unknown key '{loc[-1]}' ({hint})"
    if kind == "missing":
        return f"{':'.join([where, *loc[:-1]])}: missing required key '{loc[-1]}'"
    if kind == "value_error":  # a check of a section or mapping names the key it is about first ('lambdas: ...')
        text = problem["msg"].removeprefix("Value error, ")
        field, _, rest = text.partition(": ")
        given = problem.get("input")
        if rest and (field in _fields(loc) or (isinstance(given, dict) and field in given)):
            loc, text = [*loc, field], rest
        return f"{':'.join([where, *loc])}: {text}"
    message = problem["msg"].lower().removeprefix("input ")
    return f"{':'.join([where, *loc])}: {message} (got {_shown(problem['input'])})"


def _fields(loc: list[str]) -> list[str]:
    """The keys of the section at a key path of the params file (e.g. ['steering'] -> SteeringParams' fields), or
    none where the path leads into a mapping or list rather than a section."""
    model: Any = Params
    for key in loc:
        field = model.model_fields.get(key) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return []
        model = field.annotation
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _shown(value: Any) -> str:
    """A short repr of an offending value, built only as far as it is shown (an integer too long to print is
    described instead)."""
    try:
        text = _SHORT.repr(value)
    except ValueError:
        return "an integer too large to print"
    return text if len(text) <= 60 else text[:57] + "..."


def read_profile(profile: str | Path) -> dict[str, Any]:
    """A shipped params file (name or path) as its YAML mapping, unvalidated, for a params file built from it."""
    params = _read_yaml(params_path(profile))
    if not isinstance(params, dict):
        raise ConfigError(f"{params_path(profile)}: expected a mapping of settings at the top level")
    return params


def standin_params(profile: str | Path, folder: str | Path, dtype: str, device: str = "cpu") -> dict[str, Any]:
    """The params file `profile` as shipped but for its model, a random-weight stand-in in `folder`
    (`models.loading.standin`) in `dtype` on `device`, and the sections its chapters declare a stand-in reads otherwise
    (`ChapterSpec.standin`)."""
    params = read_profile(profile)
    params["name"] = f"standin-{params['name']}"
    params["model"] = {"path": str(Path(folder).resolve()), "dtype": dtype, "device": device}
    for spec in CHAPTERS:
        if spec.standin is not None and spec.section is not None:
            params[spec.section] = spec.standin(params.get(spec.section, {}))
    return params
