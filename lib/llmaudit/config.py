"""Params files: one YAML per audited model, validated into typed settings with one-line errors."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path, PurePosixPath
from types import UnionType
from typing import Any, get_args, get_origin, get_type_hints

import yaml

from llmaudit.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
PARAMS_DIR = REPO / "params"
# The chapter keys a params file may list, in book order (llmaudit.audit.CHAPTERS maps each to its notebook).
CHAPTER_KEYS = ("steering_vectors", "decision_tasks", "robustness", "validity", "framing", "similarity", "markedness")
PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")  # a folder under reports/, never a path
PACKAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a top-level module name: finding it imports nothing
SEED_LIMIT = 2**32
BOOTSTRAP_LIMIT = 100_000


@dataclass(frozen=True)
class ModelSpec:
    """Where the weights come from: exactly one of `embedded` (a packaged GGUF), `embedded_parts` (a GGUF split
    over several packages, joined in order and checked against `sha256`), `hf` (hub id) or `path`. Base models
    without a chat template set `chat_template: false` and read prompts as plain text."""

    embedded: str | None = None
    embedded_parts: list[str] = field(default_factory=list)
    sha256: str | None = None
    chat_template: bool = True
    hf: str | None = None
    path: str | None = None
    dtype: str = "float32"
    device: str = "cpu"
    remote: bool = False
    trust_remote_code: bool = False
    system_prompt: str | None = None


@dataclass(frozen=True)
class SteeringParams:
    """Sizes and thresholds for extracting the steering vectors (main paper §3.3), and the held-out rows and
    coefficients of the causal check (rows of the validation split that neither chose the block nor the scale)."""

    tau: float = 0.05
    normalised: bool = False
    quantile: dict[str, float] = field(default_factory=dict)
    skip_last_layers: float = 0.05
    train_rows: dict[str, int | None] = field(default_factory=dict)
    val_rows: dict[str, int | None] = field(default_factory=dict)
    demo_prompt: str = "Write one sentence about a nurse who is starting a new job."
    demo_tokens: int = 24
    check_rows: int = 64
    check_lambdas: list[float] = field(default_factory=lambda: [-1.0, -0.5, 0.0, 0.5, 1.0])


@dataclass(frozen=True)
class TaskParams:
    """Sizes and thresholds of the decision tasks (main paper §4.2-4.4): cases per task, the lambda grid of the
    white-box sweep, the invariance threshold epsilon on |slope|, and bootstrap resamples for intervals."""

    sizes: dict[str, int | None] = field(default_factory=dict)
    lambdas: list[float] = field(default_factory=lambda: [round(-1 + 0.2 * i, 1) for i in range(11)])
    epsilon: float = 0.02
    bootstrap: int = 2000
    lambda_batch: int = 1


@dataclass(frozen=True)
class ValidityParams:
    """Sizes of the validity chapter (main paper §5): SSA names kept (at least `min_births` births), names per
    p_f bin for the projections (None: all), credit profiles given one name per bin (None: the credit task's
    size), and equal-count classes for numeric variables in the Sobol' indices (None: a count that grows with the
    number of cases, `llmaudit.validity.sobol.class_count`; a fixed count loses effects that vary within a class)."""

    min_births: int = 2500
    names_per_bin: int | None = None
    name_profiles: int | None = None
    sobol_bins: int | None = None


@dataclass(frozen=True)
class FramingParams:
    """Sizes of the framing chapter ("Measuring Bias or Measuring the Task"): attributes per stereotype tag (None: all), sampled answers
    (and option orders) per cell, their length, and the steering coefficients compared with prompting."""

    per_tag: int | None = None
    samples: int = 10
    max_new_tokens: int = 16
    lambdas: list[float] = field(default_factory=lambda: [-1.0, 0.0, 1.0])


@dataclass(frozen=True)
class SimilarityParams:
    """Sizes of the similarity chapter ("Bias Similarity Measurement"): BBQ questions per (category, context, polarity) cell,
    the steering coefficients whose steered models join the comparison, the relative depths (0 = first block,
    1 = last) whose representations are compared with CKA, and other audited models (report folder names) to
    compare with."""

    per_cell: int = 4
    lambdas: list[float] = field(default_factory=lambda: [-1.0, 1.0])
    depths: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75, 1.0])
    compare_with: list[str] = field(default_factory=list)


PROBE_SETS = ("amazon", "ns_prompts", "regard")  # the markedness chapter's template sets


@dataclass(frozen=True)
class MarkednessParams:
    """Sizes of the markedness chapter ("Template-Based Probes Are Imperfect Lenses"): templates sampled per probe set (None: all), the
    demonstration pool, the few-shot seeds, and whether every group term is used or only each group's name."""

    templates: dict[str, int | None] = field(default_factory=dict)
    pool: str = "sst5"
    seeds: list[int] = field(default_factory=lambda: [2024, 2025, 2026, 2027, 2028])
    all_terms: bool = False


@dataclass(frozen=True)
class GateParams:
    """Instrument gates of the verdict page: a test whose instrument fails one is "not measurable", never a pass.
    A steering vector needs the Pearson corr of its projection with the concept score and the span of the concept
    score it steers (lambda +1 minus -1) at least these; a task's competence interval (chance level 0) must lie
    above `task_competence`; a 9-shot sentiment classifier's accuracy must beat guessing (1/3) by more than
    `classifier_accuracy`, and each label its gold answers use must make at least `classifier_min_label_share` of
    its predictions."""

    vector_corr: float = 0.2
    vector_span: float = 0.5
    task_competence: float = 0.0
    classifier_accuracy: float = 0.0
    classifier_min_label_share: float = 0.05


@dataclass(frozen=True)
class Params:
    """Everything one audit run of one model needs."""

    name: str
    model: ModelSpec
    chapters: list[str] = field(default_factory=lambda: ["steering_vectors"])
    seed: int = 0
    batch_tokens: int = 4096
    data_dir: str | None = None
    steering: SteeringParams = field(default_factory=SteeringParams)
    tasks: TaskParams = field(default_factory=TaskParams)
    validity: ValidityParams = field(default_factory=ValidityParams)
    markedness: MarkednessParams = field(default_factory=MarkednessParams)
    framing: FramingParams = field(default_factory=FramingParams)
    similarity: SimilarityParams = field(default_factory=SimilarityParams)
    gates: GateParams = field(default_factory=GateParams)


def available_models() -> list[str]:
    """Names of the params files shipped in params/."""
    return sorted(p.stem for p in PARAMS_DIR.glob("*.yaml"))


def params_path(name_or_path: str | Path) -> Path:
    """Resolve a model name (params/<name>.yaml) or a path to a params file."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"}:
        if not path.exists():
            raise ConfigError(f"params file {path} does not exist")
        return path
    candidate = PARAMS_DIR / f"{name_or_path}.yaml"
    if not candidate.exists():
        known = available_models()
        close = difflib.get_close_matches(str(name_or_path), known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(f"unknown model '{name_or_path}': {hint}known models: {', '.join(known)}")
    return candidate


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (plain YAML keeps the last) and
    a scalar it cannot build (a date like 2024-13-45, an integer of 5000 digits) is a YAML error with its line."""

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


def load_params(name_or_path: str | Path) -> Params:
    """Read and validate a params file; every problem is a one-line ConfigError naming the key."""
    path = params_path(name_or_path)
    try:
        raw = yaml.load(path.read_text(), Loader=_StrictLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(err, 'problem', err)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    params = _build(Params, raw, where=path.name)
    _check(params, path.name)
    return params


def _build(cls: type, raw: Any, where: str) -> Any:
    """Turn a mapping into dataclass `cls`, rejecting unknown keys with a suggestion."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {raw!r}")
    hints = get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(names)}"
            raise ConfigError(f"{where}: unknown key '{key}' ({hint})")
        sub = f"{where}:{key}"
        kwargs[key] = _build(hints[key], value, sub) if is_dataclass(hints[key]) else _typed(value, hints[key], sub)
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    absent = [name for name in required if name not in kwargs]
    if absent:
        raise ConfigError(f"{where}: missing required key '{absent[0]}'")
    return cls(**kwargs)


def _typed(value: Any, hint: Any, where: str) -> Any:
    """Check a value against a simple type hint (scalars, unions with None, list[...], dict[str, ...])."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): _typed(v, args[1], f"{where}:{k}") for k, v in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_typed(v, args[0], where) for v in value]
    types = args if origin is UnionType else (hint,)
    if value is None and type(None) in types:
        return None
    if isinstance(value, bool):
        ok = bool in types
    elif isinstance(value, int) and float in types and int not in types:
        ok = True
        try:
            value = float(value)
        except OverflowError:
            raise ConfigError(f"{where}: must be a finite number (got an integer too large for a float)") from None
    else:
        ok = any(isinstance(value, t) for t in types if t is not type(None))
    if not ok:
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise ConfigError(f"{where}: expected {names}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number (got {value})")
    return value


def _check(params: Params, where: str) -> None:
    """Cross-field rules that types alone cannot express."""
    _plain_name(params.name, f"{where}:name")
    if not params.chapters:
        raise ConfigError(f"{where}:chapters: list at least one chapter (known: {', '.join(CHAPTER_KEYS)})")
    for chapter in params.chapters:
        _known(chapter, list(CHAPTER_KEYS), f"{where}:chapters")
    _once(params.chapters, f"{where}:chapters")
    if not 0 <= params.seed < SEED_LIMIT:
        raise ConfigError(f"{where}:seed: must be in [0, 2^32) (got {params.seed})")
    spec = params.model
    sources = [s for s in ("embedded", "embedded_parts", "hf", "path") if getattr(spec, s)]
    if len(sources) != 1:
        raise ConfigError(f"{where}:model: set exactly one of embedded, embedded_parts, hf or path "
                          f"(got {sources or 'none'})")
    if spec.embedded_parts and not spec.sha256:
        raise ConfigError(f"{where}:model: embedded_parts needs the sha256 of the joined file")
    if spec.embedded:
        embedded_file(spec.embedded, f"{where}:model:embedded")
    for part in spec.embedded_parts:
        embedded_file(part, f"{where}:model:embedded_parts")
    if spec.dtype not in {"float32", "bfloat16", "float16"}:
        raise ConfigError(f"{where}:model:dtype: use float32, bfloat16 or float16 (got '{spec.dtype}')")
    if spec.device not in {"cpu", "cuda"}:
        raise ConfigError(f"{where}:model:device: use cpu or cuda (got '{spec.device}')")
    if spec.remote and not spec.hf:
        raise ConfigError(f"{where}:model: remote: true needs an hf id (NDIF serves hub models)")
    for key in ("tau", "skip_last_layers"):
        if not 0 <= getattr(params.steering, key) < 1:
            raise ConfigError(f"{where}:steering:{key}: must be in [0, 1) (got {getattr(params.steering, key)})")
    from llmaudit.steering.recipes import RECIPES

    known = {"quantile": sorted(RECIPES), "train_rows": sorted({r.dataset for r in RECIPES.values()})}
    known["val_rows"] = known["train_rows"]
    for key, names in known.items():
        for name in getattr(params.steering, key):
            _known(name, names, f"{where}:steering:{key}")
    for name, q in params.steering.quantile.items():
        if not 0 < q < 0.5:
            raise ConfigError(f"{where}:steering:quantile:{name}: must be in (0, 0.5) (got {q})")
    if params.steering.check_rows < 2:
        raise ConfigError(f"{where}:steering:check_rows: need at least 2 held-out rows (got {params.steering.check_rows})")
    _once(params.steering.check_lambdas, f"{where}:steering:check_lambdas")
    if not {-1.0, 1.0} <= set(params.steering.check_lambdas):
        raise ConfigError(f"{where}:steering:check_lambdas: include -1 and 1 (the span is measured between them)")
    from llmaudit.tasks import TASKS

    for name, size in params.tasks.sizes.items():
        _known(name, list(TASKS), f"{where}:tasks:sizes")
        if size is not None and size < 2:
            raise ConfigError(f"{where}:tasks:sizes:{name}: need at least 2 cases for an interval (got {size})")
    lambdas = params.tasks.lambdas
    _once(lambdas, f"{where}:tasks:lambdas")
    if 0.0 not in lambdas or len(lambdas) < 3 or lambdas != sorted(lambdas):
        raise ConfigError(f"{where}:tasks:lambdas: give at least 3 increasing values including 0 (got {lambdas})")
    if params.tasks.epsilon <= 0:
        raise ConfigError(f"{where}:tasks:epsilon: must be a finite number > 0 (got {params.tasks.epsilon})")
    if not 100 <= params.tasks.bootstrap <= BOOTSTRAP_LIMIT:
        raise ConfigError(f"{where}:tasks:bootstrap: must be an integer in [100, {BOOTSTRAP_LIMIT}] "
                          f"(got {params.tasks.bootstrap})")
    if params.tasks.lambda_batch < 1:
        raise ConfigError(f"{where}:tasks:lambda_batch: must be at least 1 (got {params.tasks.lambda_batch})")
    validity = params.validity
    if validity.min_births < 1 or (validity.sobol_bins is not None and validity.sobol_bins < 2) or any(
        n is not None and n < 2 for n in (validity.names_per_bin, validity.name_profiles)
    ):
        raise ConfigError(f"{where}:validity: need min_births >= 1, sobol_bins >= 2 (or omitted), names_per_bin "
                          "and name_profiles >= 2 (or omitted)")
    framing = params.framing
    if (framing.per_tag is not None and framing.per_tag < 1) or framing.samples < 1 or framing.max_new_tokens < 1:
        raise ConfigError(f"{where}:framing: need per_tag >= 1 (or omitted), samples >= 1 and max_new_tokens >= 1")
    _once(framing.lambdas, f"{where}:framing:lambdas")
    if len(framing.lambdas) < 2:
        raise ConfigError(f"{where}:framing:lambdas: give at least 2 distinct steering coefficients")
    similar = params.similarity
    _once(similar.lambdas, f"{where}:similarity:lambdas")
    _once(similar.depths, f"{where}:similarity:depths")
    for name in similar.compare_with:
        _plain_name(name, f"{where}:similarity:compare_with")
    if similar.per_cell < 1 or not similar.depths or not all(0 <= d <= 1 for d in similar.depths) or 0 in similar.lambdas:
        raise ConfigError(f"{where}:similarity: need per_cell >= 1, depths in [0, 1] and nonzero lambdas "
                          "(lambda 0 is the model itself, always included)")
    marked = params.markedness
    for name, size in marked.templates.items():
        _known(name, list(PROBE_SETS), f"{where}:markedness:templates")
        if size is not None and size < 2:
            raise ConfigError(f"{where}:markedness:templates:{name}: need at least 2 templates (got {size})")
    _known(marked.pool, ["sst5", "semeval"], f"{where}:markedness:pool")
    _once(marked.seeds, f"{where}:markedness:seeds")
    if len(marked.seeds) < 2 or not all(0 <= seed < SEED_LIMIT for seed in marked.seeds):
        raise ConfigError(f"{where}:markedness:seeds: give at least 2 seeds in [0, 2^32) for an interval "
                          f"(got {marked.seeds})")
    limits = {"vector_corr": (1, "1"), "vector_span": (2, "2"), "task_competence": (1, "1"),
              "classifier_accuracy": (1, "1"), "classifier_min_label_share": (1 / 3, "1/3")}
    for key, (top, shown) in limits.items():
        value = getattr(params.gates, key)
        if not 0 <= value < top:
            raise ConfigError(f"{where}:gates:{key}: must be in [0, {shown}) (got {value})")
    if params.batch_tokens < 64:
        raise ConfigError(f"{where}:batch_tokens: must be at least 64 (got {params.batch_tokens})")


def _plain_name(name: str, where: str) -> None:
    """One-line error unless `name` can only be one folder under reports/ (never a path out of it)."""
    if not PLAIN_NAME.fullmatch(name):
        raise ConfigError(f"{where}: use up to 100 letters, digits and ._- only, not starting with a dot "
                          f"(got {name!r})")


def embedded_file(spec: str, where: str) -> tuple[str, PurePosixPath]:
    """Split an embedded model file 'package/file inside it' into the package's module name and the file's path
    within the package; one-line error for anything that could name a file outside (an absolute path, '..')."""
    package, _, inner = spec.partition("/")
    segments = inner.split("/")
    if not PACKAGE.fullmatch(package) or any(s in {"", ".", ".."} or "\\" in s or "\0" in s for s in segments):
        raise ConfigError(f"{where}: give '<package>/<file inside that package>', a relative path without '..' "
                          f"(got {spec!r})")
    return package, PurePosixPath(inner)


def _once(values: list[Any], where: str) -> None:
    """One-line error for a list (a grid of coefficients, depths, seeds or chapters) that repeats a value."""
    repeated = [v for i, v in enumerate(values) if v in values[:i]]
    if repeated:
        raise ConfigError(f"{where}: list each value once (repeated: {repeated[0]})")


def _known(name: str, names: list[str], where: str) -> None:
    """One-line error, with the closest suggestion, for a name that is not among `names`."""
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(names)}"
        raise ConfigError(f"{where}: unknown name '{name}' ({hint})")
