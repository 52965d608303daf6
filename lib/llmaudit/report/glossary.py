"""The report's glossary: the terms its first screen and verdict page use, one name per idea. The steering vectors,
the tests and the margins are listed from their declarations (each test by its label, its badge on the first screen
and its results-file name, so the three names read as one test); the rest are the book glossary's definitions in
brief."""

from __future__ import annotations

from html import escape

from llmaudit.registry import gates, verdict_tests
from llmaudit.report.answer import short_label
from llmaudit.verdict.margins import EPSILONS

CSS = """
dl.glossary { display: grid; grid-template-columns: minmax(8rem, max-content) 1fr; gap: .35rem 1rem;
              font-size: .9rem; }
dl.glossary dt { font-weight: 600; overflow-wrap: anywhere; }
dl.glossary dd { margin: 0; }
""".strip()

TERMS = (
    ("pp", "Percentage points: a difference of two rates in [0, 1], times 100 (a rate of 0.18 against 0.40 differs "
           "by 22 pp)."),
    ("95% CI", "The bootstrap 95% interval of a score over the unit its test resamples (cases, name profiles or "
               "demonstration seeds)."),
    ("ε (epsilon)", "The equivalence margin of a score's unit: an invariance test passes when its whole 95% interval "
                    "lies inside ±ε, fails when it lies wholly outside, and is inconclusive otherwise (main paper "
                    "§3.4)."),
    ("λ (lambda)", "The steering coefficient: how far a white-box test moves the model's own representation of a "
                   "concept along a steering vector, in units of concept score; λ = 0 neutralises the concept, "
                   "λ = +1 steers towards female (gender) or Black (race), λ = -1 towards male or White."),
    ("gap", "A black-box score: the task's rate for one group minus the other's over the same cases (female minus "
            "male, Black minus White), the prompt changed and nothing else."),
    ("slope", "A white-box score (the main paper's sensitivity S, Eq. 2): the least-squares slope of the task's rate "
              "over the λ sweep; across λ = -1 to +1 the rate moves by about 2S."),
    ("dependence test", "A test that the decision does change with a task-relevant variable (credit: checking "
                        "account status; admissions: GPA), |S| ≥ ε: it passes wholly outside ±ε. Its white-box form "
                        "shows the steering instrument can move the decision at all, so a white-box invariance test "
                        "needs it to pass."),
    ("competence", "Whether the model does the task better than chance: accuracy minus chance, or, for a task without "
                   "one right answer, the correlation r of its rate with the decisive fact. A gate: its 95% "
                   "interval's lower bound must lie above 0."),
    ("decisive fact", "Per case, the fact a model that reads the case would follow: the profile's true credit risk "
                      "(credit), the applicant's qualifications (admissions). The judicial tasks have none, so their "
                      "competence is not checked."),
    ("gate", "A check that the instrument behind a test works before its interval is read: a task's competence, a "
             "steering vector's correlation with its concept score and its steered score span, a sentiment "
             "classifier's accuracy over guessing and its smallest predicted-label share, and, for a white-box "
             "slope, its task's white-box dependence test."),
    ("not measurable", "A test whose instrument fails a gate: it gives no verdict, which says nothing about bias "
                       "either way."),
    ("not checked", "A gate whose number the audit cannot have (the task has no gold answer, no task-relevant "
                    "concept) or did not record; the test is read without it, and the first screen says so."),
    ("p_adj", "A fail's p-value of |S| > ε, adjusted by Holm's correction over every measurable invariance test of "
              "the page; a fail survives when p_adj ≤ 0.05."),
    ("AAL, WME", "African American Language and White Mainstream English: the two dialects of the judicial tasks' "
                 "paired utterances, which imply the speaker's race (race_dial is made from the same data set)."),
    ("FPR gap", "A sentiment classifier's false positive rate on White sentences minus its mean over the named "
                "groups, in one 9-shot run, averaged over demonstration seeds."),
)


def _vectors() -> list[tuple[str, str]]:
    """Each steering vector a verdict test steers: its concept (its gates' declaration) and where λ = +1 steers (the
    sign of the tests along it)."""
    concepts = {vector: concept for gate in gates() for vector, concept in gate.concepts.items()}
    found: dict[str, str] = {}
    for test in verdict_tests():
        vectors = [name for kind, name in test.instruments if kind == "vector"]
        for vector in vectors:
            found.setdefault(vector, f"The {concepts.get(vector, '')} steering vector {vector}; λ = +1 steers towards "
                                     f"{test.sign.plus}, λ = -1 towards {test.sign.minus}.")
    return list(found.items())


def _tests() -> list[tuple[str, str]]:
    """Each kind of verdict test by its label, with its first-screen badge and its results-file name (the task or
    probe set it reads written {task})."""
    found: dict[str, tuple[str, set[str]]] = {}
    for test in verdict_tests():
        subject = test.instruments[0][1]
        pattern = test.name.replace(subject, "{task}", 1) if test.name.startswith(f"{subject}.") else test.name
        found.setdefault(test.label, (short_label(test.label), set()))[1].add(pattern)
    return [(label, f"badge “{badge}”; results file {', '.join(sorted(names))}")
            for label, (badge, names) in found.items()]


def entries() -> list[tuple[str, str]]:
    """Every glossary entry (term, definition), in page order: terms, margins, vectors, tests."""
    margins = [(f"ε {e.key}", f"The margin of scores in {e.unit}.") for e in EPSILONS]
    return [*TERMS, *margins, *_vectors(), *_tests()]


def glossary_section() -> str:
    """The glossary as a definition list."""
    items = "".join(f"<dt>{escape(term)}</dt><dd>{escape(text)}</dd>" for term, text in entries())
    return ('<section id="glossary"><h2>Glossary</h2>\n<p>The terms the first screen and the verdict page use. Each '
            "test is named by its label; its badge and its results-file name are listed with it.</p>\n"
            f'<dl class="glossary">{items}</dl></section>')
