"""The versions the README and the docs quote are the ones the repository pins.

Covers: every "Spark/pyspark X.Y[.Z]", "Kafka X.Y[.Z]" / "kafka-clients X.Y.Z",
"Kubernetes/kube-apiserver/kubectl/kubelet vX.Y[.Z]", "etcd vX.Y.Z", "containerd vX.Y.Z",
"Python X.Y[.Z]" and hangwatch image tag or appVersion quoted in README.md, docs/ and the
examples' READMEs is one a source pins (the table `SOURCES`, read from the files
themselves: pyproject's extras and requires-python, the lab's and the incident clients'
poms, scripts/kube/*/go.mod, Chart.yaml, the operator's native-sidecar minimum, the
images' Dockerfiles), where "X.Y" may name the line of a pin ("Kafka 3.9" for 3.9.2) and
a pin "X.Y" a release of its line ("Python 3.11.7" for 3.11); a floor ("X.Y+", "X.Y or
later") of Python or Kubernetes is a declared floor; anything else is a `HISTORICAL`
entry for that file with its reason, and an entry no longer quoted fails (so the list
shrinks as the docs do). The suite's test counts quoted there ("N tests", "N passed")
agree with each other. Each rule is shown to reject a wrong quote.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import yaml

from hangwatch_operator import injection

ROOT = Path(__file__).resolve().parents[2]
V = r"v?(\d+\.\d+(?:\.\d+)*)"
"""A version as prose quotes it (a leading v allowed), captured without the v."""


def _read(path: str) -> str:
    return (ROOT / path).read_text()


def _pyproject(path: str) -> dict[str, object]:
    return tomllib.loads(_read(path))["project"]  # type: ignore[no-any-return]


def _spark() -> set[str]:
    extras = _pyproject("pyproject.toml")["optional-dependencies"]
    assert isinstance(extras, dict)
    pins = {m for deps in extras.values() for d in deps for m in re.findall(r"pyspark==(\S+)", d)}
    example = "examples/spark-on-kubernetes/"
    pins |= set(re.findall(r"spark:(\d+\.\d+\.\d+)-", _read(example + "Dockerfile")))
    pins |= set(re.findall(r"sparkVersion: (\S+)", _read(example + "sparkapplication.yaml")))
    return pins


def _kafka() -> set[str]:
    lab = {m for p in ROOT.glob("lab/kafka/**/pom.xml") for m in _kafka_version(p.read_text())}
    clients = ROOT.glob("testing/clients/incidents/java/*/*.xml")  # pom.xml, <release>.xml
    pattern = r"<groupId>org\.apache\.kafka</groupId>\s*<artifactId>[^<]+</artifactId>\s*"
    pattern += r"<version>([^<$]+)</version>"
    return lab | {m for p in clients for m in re.findall(pattern, p.read_text())}


def _kafka_version(pom: str) -> list[str]:
    return re.findall(r"<kafka\.version>([^<]+)</kafka\.version>", pom)


def _go_required(module_dir: str, module: str) -> set[str]:
    found = re.findall(rf"^\s*(?:require\s+)?{re.escape(module)} v(\S+)", _read(module_dir), re.M)
    assert found, f"{module_dir} requires no {module}"
    return set(found)


def _kube_floor() -> str:
    chart = yaml.safe_load(_read("charts/hangwatch/Chart.yaml"))
    found = re.match(r">=\s*(\d+\.\d+)", chart["kubeVersion"])
    assert found, chart["kubeVersion"]
    return found.group(1)


def _native_sidecars() -> str:
    minor = re.search(r"native_sidecar_min_minor: int = (\d+)", _read(SETTINGS))
    assert minor, f"{SETTINGS} has no native_sidecar_min_minor"
    return f"1.{minor.group(1)}"


SETTINGS = "operator/hangwatch_operator/settings.py"


def _kubernetes() -> set[str]:
    pinned = _go_required("scripts/kube/kubernetes/go.mod", "k8s.io/kubernetes")
    return pinned | _kubernetes_floors()


def _kubernetes_floors() -> set[str]:
    """The chart's floor, `auto`'s native-sidecar floor and the first minor that knows
    native sidecars at all (a forced native below it is injected as legacy)."""
    first_native = f"1.{injection.NATIVE_SIDECAR_FIRST_MINOR}"
    return {_kube_floor(), _native_sidecars(), first_native}


def _python_floors() -> set[str]:
    floors = set()
    for path in ("pyproject.toml", "producer/pyproject.toml"):
        found = re.match(r">=\s*(\d+\.\d+)", str(_pyproject(path)["requires-python"]))
        assert found, path
        floors.add(found.group(1))
    return floors


def _python() -> set[str]:
    """The floors and the Pythons the images are built on."""
    example = "examples/spark-on-kubernetes/Dockerfile"
    images = ["image/Dockerfile", "image/spark/Dockerfile", example]
    found = {m for p in images for m in re.findall(r"python:(\d+\.\d+)-", _read(p))}
    found |= set(re.findall(r"SPARK_IMAGE_PYTHON=(\d+\.\d+)", _read(example)))
    return _python_floors() | found


def _app_version() -> set[str]:
    return {str(yaml.safe_load(_read("charts/hangwatch/Chart.yaml"))["appVersion"])}


@dataclass(frozen=True)
class Source:
    """Where a product's versions are pinned, and how prose quotes them."""

    pins: Callable[[], set[str]]
    quoted: str
    """A regex whose group 1 is a quoted version."""
    floors: Callable[[], set[str]] | None = None
    """The only versions a floor ("X.Y+", "X.Y or later") may name; None: not checked."""


SOURCES = {
    "Spark": Source(_spark, rf"\b(?:Spark|pyspark|PySpark) {V}"),
    "Kafka": Source(_kafka, rf"\b(?:Kafka|kafka-clients|kafka_2\.1[123]-?) {V}"),
    "Kubernetes": Source(
        _kubernetes, rf"\b(?:Kubernetes|kube-apiserver|kubectl|kubelet) {V}", _kubernetes_floors
    ),
    "etcd": Source(
        partial(_go_required, "scripts/kube/etcd/go.mod", "go.etcd.io/etcd/server/v3"),
        rf"\betcd {V}",
    ),
    "containerd": Source(
        partial(
            _go_required, "scripts/kube/containerd/go.mod", "github.com/containerd/containerd/v2"
        ),
        rf"\bcontainerd {V}",
    ),
    "Python": Source(_python, rf"\bPython {V}", _python_floors),
    "hangwatch": Source(_app_version, r"(?:hangwatch:|appVersion\W{1,3})(\d+\.\d+\.\d+)"),
}
"""Product -> its pins and how the docs quote it."""

HISTORICAL = {
    ("docs/demo.md", "Spark", "4.3.0"): "the demo's progress lines, labelled as an earlier "
    "version's run on pyspark 4.3.0, before the 4.2.0 pin",
    ("docs/pipeline.md", "Spark", "4.3.0"): "the recorded run's environment, labelled as "
    "pyspark 4.3.0 before the 4.2.0 pin",
    ("docs/sidecar.md", "Spark", "3.1"): "Spark 3.1 added the stage attempt to task names "
    "(what the thread-name parser accepts before it)",
    ("docs/operator-remediation.md", "Spark", "3.5"): "Spark 3.5 introduced the executor "
    "failure budget the sidecar reads (a fact about Spark, not a pin)",
    ("docs/lab.md", "Kafka", "4.0"): "the release that removed the protocol versions old "
    "clients speak (KIP-896): why the lab's default engine is 3.9",
    ("docs/testing-tiers.md", "Kubernetes", "1.20.2"): "the section on the tier's retired "
    "v1.20.2 server",
    ("docs/pipeline.md", "Kafka", "3.4.1"): "the kafka-clients Spark 3.5.7's connector "
    "brings (resolved by Maven from its pom, not pinned here)",
    ("docs/spark-kafka-sink.md", "Python", "3.8"): "pyspark 3.5's own lower bound (a fact "
    "about Spark, not a pin of ours)",
}
"""(file, product, version) quoted that no source pins -> why it stays."""

FLOOR = r"(?:\+|\s+or\s+later|\s+and\s+later)"
COUNT = re.compile(r"\b(\d{1,3}(?:,\d{3})+|\d{3,}) (?:tests\b|passed\b)")


def _documents() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "examples").rglob("README.md")),
    ]


@dataclass(frozen=True)
class Quote:
    where: str
    line: int
    product: str
    version: str
    floor: bool


def quotes(text: str, where: str) -> Iterator[Quote]:
    """Every version `text` quotes for a product of `SOURCES`."""
    for number, line in enumerate(text.splitlines(), start=1):
        for product, source in SOURCES.items():
            for match in re.finditer(source.quoted, line):
                floor = re.match(FLOOR, line[match.end() :]) is not None
                yield Quote(where, number, product, match.group(1), floor)


def problem(quote: Quote, pins: dict[str, set[str]]) -> str | None:
    """Why `quote` disagrees with the sources, or None."""
    if (quote.where, quote.product, quote.version) in HISTORICAL:
        return None
    source = SOURCES[quote.product]
    if quote.floor and source.floors is not None:
        floors = source.floors()
        if quote.version in floors:
            return None
        return f"{quote.product} {quote.version}+ is no declared floor ({sorted(floors)})"
    pinned = pins[quote.product]
    on_a_line = any(p.startswith(quote.version + ".") for p in pinned)  # "Kafka 3.9"
    in_a_line = any(quote.version.startswith(p + ".") for p in pinned)  # "Python 3.11.7"
    if quote.version in pinned or on_a_line or in_a_line:
        return None
    return f"{quote.product} {quote.version} is pinned nowhere (pins: {sorted(pinned)})"


@pytest.fixture(scope="module")
def pins() -> dict[str, set[str]]:
    found = {product: source.pins() for product, source in SOURCES.items()}
    for product, versions in found.items():
        assert versions, f"no pinned {product} version found: has a source moved?"
    return found


def test_every_quoted_version_is_pinned_or_historical(pins: dict[str, set[str]]) -> None:
    wrong = []
    for path in _documents():
        where = str(path.relative_to(ROOT))
        for quote in quotes(path.read_text(), where):
            if (why := problem(quote, pins)) is not None:
                wrong.append(f"{where}:{quote.line}: {why}")
    assert not wrong, (
        "versions quoted that no source pins (fix the text, or add a HISTORICAL entry "
        "with the reason):\n" + "\n".join(wrong)
    )


def test_every_historical_entry_is_still_quoted() -> None:
    quoted = {
        (q.where, q.product, q.version)
        for path in _documents()
        for q in quotes(path.read_text(), str(path.relative_to(ROOT)))
    }
    gone = sorted(set(HISTORICAL) - quoted)
    assert not gone, f"HISTORICAL entries no document quotes any more (remove them): {gone}"


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("installs pyspark 4.9.9 for you", True),
        ("runs on Spark 4.2 (Scala 2.13)", False),
        ("real Apache Kafka 3.9 (KRaft)", False),
        ("Apache Kafka 3.8.1's jars", True),
        ("kube-apiserver v1.36.0 on loopback", True),
        ("On Kubernetes 1.24+ (CEL)", True),
        ("Python 3.8+ only", True),
        ("Python 3.9+, only confluent-kafka", False),
        ("push registry.example.com/platform/hangwatch:9.9.9", True),
        ("etcd v3.0.0", True),
    ],
)
def test_a_wrong_quote_is_caught(text: str, wrong: bool, pins: dict[str, set[str]]) -> None:
    found = list(quotes(text, "example.md"))
    assert len(found) == 1, found
    assert (problem(found[0], pins) is not None) is wrong


def test_quoted_test_counts_agree() -> None:
    counts: dict[int, list[str]] = {}
    for path in _documents():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for match in COUNT.finditer(line):
                where = f"{path.relative_to(ROOT)}:{number}"
                counts.setdefault(int(match.group(1).replace(",", "")), []).append(where)
    assert len(counts) <= 1, f"the docs quote different test counts: {counts}"
