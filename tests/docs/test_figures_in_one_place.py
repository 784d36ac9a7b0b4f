"""Figures that more than one page could quote come from one place (issue 45, item 5).

Covers:
- the suite's own time (a cold `make test`, its setup, the floor release's build): the
  current figures are docs/testing-tiers.md's time table, generated from a run by
  scripts/time_table.py (a phase row each for setup, pytest and `make test`, a
  `build-kube:` row for the floor release); every other page points there. A sentence
  that names `make test`, `.ci/run`, setup or the floor release beside a figure in
  minutes is allowed outside the table only in testing-tiers.md's history, where it says
  when it was measured (a commit or a date), or as a figure of one test or group that
  `OTHER_FIGURES` names with its reason (an entry no longer quoted fails, so the list
  shrinks as the docs do);
- the time-to-error budget's default: a sidecar run alone and a policy's field left out
  differ on purpose (`STANDALONE`, `POLICY` in core/hangwatch/defaults.py;
  test_defaults_quoted.py checks both tables); every figure a sentence about that
  budget quotes is one of the two, "N s unless set" is the policy's, "alone ...
  defaults to N s" the standalone one, and docs/sidecar.md's summary of the policy
  profile quotes every `POLICY` value it names.
Each rule is shown to reject a planted disagreement.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.defaults import POLICY, STANDALONE

ROOT = Path(__file__).resolve().parents[2]
HOME = "docs/testing-tiers.md"
"""The page whose time table holds the suite's figures."""
TABLE = re.compile(r"<!-- time-table:.*?<!-- /time-table -->", re.S)
SUBJECT = re.compile(
    r"make test\b|\.ci/run|setup\.sh|\bsetup (?:took|about|\d)|floor release|floor build|--floor",
    re.I,
)
"""What a sentence quoting one of the suite's figures names."""
MINUTES = re.compile(
    r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?min(?:utes?)?\b(?: \d+ s\b)?|\b\d+m\d\ds\b"
)
MEASURED = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b|\b20\d\d-\d\d-\d\d\b")
"""When a figure was measured: a commit or an ISO date."""
OTHER_FIGURES = {
    ("docs/check.md", "6 min 38 s"): "the `hangwatch check` tests' own time on a date it names",
    ("docs/pipeline.md", "10 min 52 s"): "the Spark 3.5 subset's own time in its group",
    ("docs/pipeline.md", "5 min 12 s"): "the Spark 3.5 subset's own time in a cold run",
    ("docs/producer.md", "7 min 44 s"): "the Python 3.9 test's own time from an empty cache",
}
"""(page, figure) beside `make test` or setup that is no figure of the suite's -> why."""
BUDGET = re.compile(r"time-to-error budget|error budget|timeToErrorBudgetSeconds", re.I)
SECONDS = re.compile(r"\b(\d+)(?:\.0)? ?s\b")


def _pages() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").rglob("README.md")),
    ]


def sentences(text: str) -> Iterator[str]:
    """The prose of a Markdown page a sentence at a time (a table row at a time, with
    the paragraph before its table, which says what the table measured), code blocks
    and the generated time table left out."""
    text = re.sub(r"```.*?```", "", TABLE.sub("", text), flags=re.S)
    before = ""
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in paragraph.splitlines() if line.strip()]
        if lines and all(line.startswith("|") for line in lines):
            yield from (f"{before} {row}" for row in lines)
            continue
        before = " ".join(lines)
        yield from re.split(r"(?<=[.;])\s+(?=[A-Z(`*])", before)


def suite_figures(page: str, text: str) -> list[str]:
    """What `page` says of the suite's time outside the time table that it should not:
    each problem a line."""
    problems = []
    for sentence in sentences(text):
        if not SUBJECT.search(sentence):
            continue
        for figure in MINUTES.findall(sentence):
            if (page, figure) in OTHER_FIGURES:
                continue
            if page != HOME:
                problems.append(f"{page}: {figure!r} beside {SUBJECT.search(sentence)[0]!r}")
            elif not MEASURED.search(sentence):
                problems.append(f"{page}: {figure!r} says neither a commit nor a date")
    return problems


def budget_figures(page: str, text: str) -> list[str]:
    """Every figure quoted about the time-to-error budget that is no profile's default,
    or another profile's than the sentence says."""
    allowed = {STANDALONE.time_to_error_budget_seconds, POLICY.time_to_error_budget_seconds}
    problems = []
    for sentence in sentences(text):
        if not BUDGET.search(sentence):
            continue
        for figure in (int(n) for n in SECONDS.findall(sentence)):
            if figure not in allowed and re.search(
                rf"budget\D{{0,40}}\b{figure}(?:\.0)? ?s\b", sentence
            ):
                problems.append(f"{page}: a budget of {figure} s is no default ({sorted(allowed)})")
        for unless in re.findall(r"\b(\d+) s unless set", sentence):
            if int(unless) != POLICY.time_to_error_budget_seconds:
                problems.append(f"{page}: {unless} s unless set is not the policy's default")
        for alone in re.findall(r"\balone\b[^.;]*?\bdefaults to (\d+) s", sentence):
            if int(alone) != STANDALONE.time_to_error_budget_seconds:
                problems.append(f"{page}: {alone} s is not the standalone default")
    return problems


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_time_table_holds_the_suites_figures() -> None:
    table = TABLE.search((ROOT / HOME).read_text())
    assert table, f"{HOME} has no generated time table"
    for phase in ("setup", "pytest", r"\*\*make test\*\*"):
        assert re.search(rf"^\| {phase} \| \S*\d+m\d\ds\S* \|$", table[0], re.M), phase
    builds = re.findall(
        r"^\| build-kube: kubernetes-v(\d+)\.(\d+)\.\d+ \| \d+m\d\ds \|$", table[0], re.M
    )
    assert len(builds) == 2, f"the latest and the floor release's build rows: {builds}"


def test_no_page_quotes_the_suites_time_but_the_time_table_and_its_history() -> None:
    problems = [p for page in _pages() for p in suite_figures(_relative(page), page.read_text())]
    assert not problems, "\n".join(problems)


def test_every_other_figure_beside_the_suite_is_still_quoted() -> None:
    quoted = {
        (page, figure) for page, figure in OTHER_FIGURES if figure in (ROOT / page).read_text()
    }
    assert quoted == set(OTHER_FIGURES), set(OTHER_FIGURES) - quoted


def test_every_time_to_error_budget_quoted_is_its_profiles_default() -> None:
    problems = [p for page in _pages() for p in budget_figures(_relative(page), page.read_text())]
    assert not problems, "\n".join(problems)


def test_the_sidecar_pages_summary_of_the_policy_profile_is_policy() -> None:
    text = " ".join((ROOT / "docs" / "sidecar.md").read_text().split())
    found = re.search(
        r"\(`POLICY`\): a round every (\d+) s, stall (\d+) s, heartbeat (\d+) s, metadata "
        r"(\d+) s, election grace (\d+) s, error budget (\d+) s",
        text,
    )
    assert found, "docs/sidecar.md no longer summarises the policy profile as this test reads it"
    assert [int(n) for n in found.groups()] == [
        POLICY.probe_interval_seconds,
        POLICY.stall_seconds,
        POLICY.heartbeat_seconds,
        POLICY.metadata_max_age_seconds,
        POLICY.election_grace_seconds,
        POLICY.time_to_error_budget_seconds,
    ]


@pytest.mark.parametrize(
    ("page", "text"),
    [
        ("README.md", "A cold `make test` takes 58 min on two cores."),
        ("docs/development.md", "The whole `setup.sh --kube` took 12 min 3 s."),
        ("docs/testing-tiers.md", "The floor release builds in about 10 minutes cold."),
    ],
)
def test_a_figure_of_the_suite_out_of_place_is_caught(page: str, text: str) -> None:
    assert suite_figures(page, text)


def test_history_that_says_when_it_was_measured_is_kept() -> None:
    history = "The round before, at 88a56cf: 70 min 53 s (setup about 19 minutes)."
    assert suite_figures(HOME, history) == []
    assert (
        suite_figures("docs/check.md", "Run here: 6 min 38 s with the good install's setup 171 s.")
        == []
    )


@pytest.mark.parametrize(
    "text",
    [
        "the policy profile (`POLICY`): a round every 10 s, error budget 90 s.",
        "its policy's `detection.timeToErrorBudgetSeconds` (60 s unless set).",
        "| `timeToErrorBudgetSeconds` | 120 | A sidecar run alone defaults to 120 s. |",
    ],
)
def test_a_budget_quoted_wrong_is_caught(text: str) -> None:
    assert budget_figures("docs/x.md", text)
