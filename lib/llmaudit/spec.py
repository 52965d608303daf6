"""What a chapter declares about itself, in one place (its package's `spec` module): its key, its params section,
the results it records, the gates of its instruments, the verdict tests its results feed, the packages whose code
decides its forward passes, and its steps in the audit's generic parts (hooks). `llmaudit.registry` lists the
declarations; the audit's chapter list, params file, cache hash, verdict page and book contents are built from them,
so adding a chapter touches its own package, its notebook and the registry (one line, and one more for a params
section, which `Params` types). Declarations are keyword-only and checked as they are made (pydantic dataclasses)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from pydantic.dataclasses import dataclass as declaration

from llmaudit.capabilities import Capability
from llmaudit.errors import AuditError
from llmaudit.sections import Section


@dataclass(frozen=True, kw_only=True)
class Epsilon:
    """The equivalence margin of the scores of one unit (main paper §3.4: invariance is |S| <= epsilon): the params
    file's `epsilon.<key>`, the unit it is in, its default, and the top of its valid range (0, top) with the reason
    for it (`beyond`: at or above the top no score of this unit could fail, so every measurable test would pass)."""

    key: str
    unit: str
    default: float
    top: float
    beyond: str


Text = Annotated[str, Field(min_length=1)]  # a declared name or sentence: never empty
Instrument = tuple[Text, Text]  # (kind, name): 'vector', 'gender_id'


@dataclass(frozen=True, kw_only=True)
class Sign:
    """What a test's positive score means, so the report can say it in the decision's own direction: a gap (`step`
    '') is the `quantity` of `plus` minus that of `minus`; a slope is the quantity's change per `step` from `minus`
    towards `plus`, steering `along` a vector ('' where the prompt varies, as a dependence test's levels do), taken
    across `span` (the lowest and highest coefficient), or across the grid the run's params set at `grid` (e.g.
    'tasks.lambdas'), `span` being its default; `bounds`: the values the score can take, where its chapter clips an
    interval to them (None: no such clipping), so that the report can say where an interval reaches them."""

    quantity: str
    plus: str
    minus: str
    step: str = ""
    along: str = ""
    span: tuple[float, float] | None = None
    grid: str = ""
    bounds: tuple[float, float] | None = None


@declaration(frozen=True, kw_only=True)
class VerdictTest:
    """One test of a requirement, as the verdict page reads it: the results-file name of its score, its label, the
    unit its bootstrap resampled, the instruments (kind, name) whose gates it must pass, the metric its case records
    hold (the report's evidence names its columns by it), the margin its score is judged against, its kind (main
    paper §3.4: `invariance`, |S| <= epsilon, or `dependence`, |S| >= epsilon) and `needs`: the results-file name of a
    dependence test that must pass for this one to be measurable (the instrument can move the decision), '' for
    none; `sign`: what its positive score means (`Sign`); `deployed`: the test a deployed user triggers (the
    attribute stated in the prompt), which the first screen shows beside whichever test decides."""

    requirement: Text
    name: Text
    label: Text
    resampled: Text
    instruments: tuple[Instrument, ...]
    metric: Text
    epsilon: Epsilon
    kind: Literal["invariance", "dependence"] = "invariance"
    needs: str = ""
    sign: Sign
    deployed: bool = False


@dataclass(frozen=True)
class Headline:
    """A number the report lists among a chapter's headline numbers: its results-file name, what it is, its unit,
    and in one line what it means for the reader."""

    name: str
    label: str
    unit: str
    meaning: str


@dataclass(frozen=True)
class Result:
    """A result a chapter records, declared beside it: its results-file name, where each `{field}` stands for any
    characters, none included (e.g. '{task}.blackbox_explicit'), its unit and in one line what it means (both
    written with every row of the results files; a declaration without either is refused)."""

    name: str
    unit: str
    meaning: str

    def __post_init__(self) -> None:
        for part in ("name", "unit", "meaning"):
            if not getattr(self, part).strip():
                raise ValueError(f"result {self.name!r} declares no {part}: every result has a name, a unit and a "
                                 "meaning")

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The names the declaration covers."""
        parts = re.split(r"\{\w+\}", self.name)
        return re.compile(".*".join(re.escape(part) for part in parts))

    def matches(self, name: str) -> bool:
        """Whether `name` is one of the results this declaration covers."""
        return self.pattern.fullmatch(name) is not None

    def named(self, **fields: str) -> str:
        """The results-file name for these fields, e.g. named(task='credit') -> 'credit.blackbox_explicit'."""
        return self.name.format(**fields)

    def headline(self, label: str, meaning: str | None = None, **fields: str) -> Headline:
        """This result as a headline number of the report (`meaning`: a reading more specific than the declared one)."""
        return Headline(self.named(**fields), label, self.unit, meaning or self.meaning)


def declared(results: Iterable[Result], name: str) -> Result | None:
    """The declaration among `results` that covers `name`, if any."""
    return next((r for r in results if r.matches(name)), None)


@declaration(frozen=True, kw_only=True)
class Gate:
    """A check the verdict page makes of an instrument its chapter evaluates (a vector, task or probe set): the
    results-file number '{instrument name}.{name}' (its value, or the lower bound of its interval: `column`) against
    the params file's `gates` threshold `threshold` (default `default`, settable in [0, `top`)), strictly above it or
    at least it; `failing` says what a failure means ({concept}: the instrument's entry in `concepts`), `unrecorded`
    why a run that evaluated the instrument may have recorded no such number. `chapter`: the declaring chapter's key,
    set by the registry."""

    instrument: Text
    name: Text
    label: Text
    column: Literal["value", "lo"]
    threshold: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]  # a key of the params file's gates section
    default: Annotated[float, Field(ge=0)]
    top: Annotated[float, Field(gt=0)]
    strict: bool
    failing: Text
    unrecorded: Text = "its run recorded no such number: rerun the chapter with this version"
    concepts: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    chapter: str = ""

    @model_validator(mode="after")
    def _default_below_top(self) -> Gate:
        """The default threshold lies in the range the params file may set, [0, top)."""
        if self.default >= self.top:
            raise ValueError(f"gate {self.name}: default {self.default:g} must lie below its top {self.top:g}")
        return self

    def failure(self, subject: str) -> str:
        """What a failure of this gate means for the instrument `subject`."""
        return self.failing.format(concept=self.concepts.get(subject, ""))


def no_tests(params: Any) -> list[VerdictTest]:
    """For chapters whose results feed no verdict test."""
    return []


def no_check(params: Any, reports: Path) -> None:
    """For chapters with nothing to check before an audit's chapters run."""


def probabilities_only(params: Any) -> tuple[Capability, ...]:
    """For chapters that read next-token probabilities and nothing else of the model."""
    return (Capability.PROBABILITIES,)


@dataclass(frozen=True, kw_only=True)
class IndexFigure:
    """A section a chapter adds to the cross-model index: its title, what it shows, and `charts(reports, models,
    own)`: the charts comparing the audited `models` (none where none has its results) and why a model was left out;
    damaged files of the `own` folder, the audit just run, stop with their error."""

    title: str
    text: str
    charts: Callable[[Path, list[str], str | None], tuple[list[Any], list[str]]]


@declaration(frozen=True, kw_only=True)
class ChapterSpec:
    """A chapter's declaration. `section`/`params`: its part of the params file (None: it has none); `reads`: other
    chapters' sections it also runs with (the robustness chapter reruns the decision tasks' sizes); `computing`: the
    llmaudit packages whose code decides what its forward passes compute, named from llmaudit down
    ('models', 'chapters.decision_tasks'; part of its cache key); `reuses`: the chapters whose forward passes it
    repeats and reads from their tensor caches (the robustness chapter's main-vector sweeps are the decision tasks'),
    whose packages its cache key covers too;
    `verdict_tests(params)`: the tests its results feed, for a run with these params (None: every test it can feed);
    `headlines`: the few results the report shows as its headline numbers (all of them stay in results.csv and
    results.json). Its steps in the audit's generic parts, declared here so that no generic module imports a chapter:
    `preflight(params, reports)`, a check before any chapter of an audit that lists it runs (a one-line ConfigError);
    `needs(params)`, what the model's engine must be able to do for it to run (checked before any chapter runs);
    `standin(section)`, its params section as a random-weight stand-in's audit reads it (None: as shipped);
    `reused(section)`, its section of a shipped profile as the audit of another model (--model) reads it; `index`,
    its section of the cross-model index; `answers(tokenizer, params)`, why a tokenizer cannot run its section's
    decisions ('' where it can; checked for an audit of --model that reads the section); `concepts`, the concept
    each instrument it saves for the other chapters stands for; `versioned()`, per task, the modules that build its
    prompts and its own settings, which its version in results.json hashes (None: the chapter's modules alone)."""

    key: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]  # a notebook stem's tail and a params key
    title: Text
    computing: Annotated[tuple[Text, ...], Field(min_length=1)]
    section: str | None = None
    params: type[Section] | None = None
    reads: tuple[str, ...] = ()
    reuses: tuple[str, ...] = ()
    verdict_tests: Callable[[Any], list[VerdictTest]] = field(default=no_tests)
    headlines: tuple[Headline, ...] = ()
    results: tuple[Result, ...] = ()
    gates: tuple[Gate, ...] = ()
    preflight: Callable[[Any, Path], None] = field(default=no_check)
    needs: Callable[[Any], tuple[Capability, ...]] = field(default=probabilities_only)
    standin: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    reused: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    index: IndexFigure | None = None
    answers: Callable[[Any, Any], str] | None = None
    concepts: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    versioned: Callable[[], Mapping[str, tuple[tuple[Path, ...], str]]] | None = None

    def declared(self, name: str) -> Result:
        """The declaration of a result this chapter records; an undeclared name is a one-line AuditError naming the
        chapter and its closest declared names."""
        found = declared(self.results, name)
        if found is None:
            close = difflib.get_close_matches(name, [r.name for r in self.results], n=3, cutoff=0.4)
            hint = f"closest declared: {', '.join(close)}" if close else "it declares none like it"
            raise AuditError(f"chapter '{self.key}' declares no result '{name}' ({hint}): declare it in its spec.py")
        return found


def result(subject: str, quantity: str) -> str:
    """A results-file name: the subject (a vector, task or probe set) and the quantity, e.g. 'credit.competence'."""
    return f"{subject}.{quantity}"
