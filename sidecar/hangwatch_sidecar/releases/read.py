"""Which Kafka client release a producer runs, from what the pod shows without privilege (pure).

Each reader takes bytes or text a process exposes and returns the client releases found
(`Sighting`s: client, version, where it was read), or none. Everything here crosses a
trust boundary - a binary, a package.json, a command line is whatever the pod's
processes put there - so every reader is bounded, never raises on what it is given and
returns no sighting rather than a guess:

- `go_modules`: a Go executable's embedded build information (Go 1.18 and later: the
  `\\xff Go buildinf:` header, its version and module strings inline), the `dep` lines
  of sarama (github.com/IBM/sarama, github.com/Shopify/sarama) and segmentio/kafka-go,
  a `=>` replacement taking the replaced module's place; executables of older Go keep
  these strings behind pointers and give nothing;
- `java_classpath`: a `kafka-clients-X.Y.Z.jar` among the entries of a classpath
  (`-cp`, `-classpath`, `--class-path`, `CLASSPATH`), a jar file name or a URL;
- `package_json`: a package.json naming `kafkajs` and its version;
- `python_dist_info`: a `confluent_kafka-X.Y.Z.dist-info` directory name (the wheel
  carries the librdkafka of its own version).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hangwatch.known_hangs import MAX_VERSION_CHARS, release

GO_BUILDINFO_MAGIC = b"\xff Go buildinf:"
"""The header of a Go executable's build information (its `.go.buildinfo` section)."""
GO_BUILDINFO_HEADER = 32
"""Bytes of that header: the magic, pointer size, flags, padding."""
GO_INLINE_STRINGS = 0x2
"""Flag of Go 1.18 and later: the version and module strings follow the header."""
MAX_GO_MODINFO = 1 << 20
"""Module information longer than this is not a build's."""
MAX_BUILDINFO_BYTES = GO_BUILDINFO_HEADER + 2 * (10 + MAX_GO_MODINFO)
"""The header and two strings of at most `MAX_GO_MODINFO`, with their lengths."""
MAX_TEXT = 1 << 16
"""A package.json, classpath or command line longer than this is cut here."""

GO_MODULES = {
    "github.com/IBM/sarama": "sarama",
    "github.com/Shopify/sarama": "sarama",
    "github.com/segmentio/kafka-go": "kafka-go",
}
"""Go module path -> the client it is (sarama moved from Shopify to IBM at v1.40)."""

_JAR = re.compile(r"(?:^|[/\\:_])kafka-clients-([0-9][0-9A-Za-z.+~_-]{0,63})\.jar$")
"""A kafka-clients jar: a path, a URL, or Ivy's name of it (`org.apache.kafka_kafka-clients-
3.9.2.jar`, what `--packages` puts on Spark's classpath)."""


@dataclass(frozen=True)
class Sighting:
    """One client release seen in the pod, and where."""

    client: str
    version: str
    source: str
    """Where it was read (`telemetry of producer ...`, `process 42 (go build info)`...)."""


def _varint(data: bytes, at: int) -> tuple[int, int] | None:
    """The unsigned varint at `at` and the offset after it; None past the end or too long."""
    value = shift = 0
    for i in range(at, min(len(data), at + 10)):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    return None


class Searchable(Protocol):
    """Bytes, or a memory map of a file: what the build information is looked for in."""

    def find(self, sub: bytes, start: int = ..., /) -> int: ...
    def __getitem__(self, index: slice, /) -> bytes: ...
    def __len__(self) -> int: ...


def buildinfo(data: Searchable) -> bytes:
    """The build information of a Go executable (`data`: its bytes or a memory map of it):
    its header and what may follow, at most `MAX_BUILDINFO_BYTES`; empty when it has none
    (the header sits on a 16-byte boundary)."""
    at = data.find(GO_BUILDINFO_MAGIC)
    while at >= 0 and at % 16:
        at = data.find(GO_BUILDINFO_MAGIC, at + 1)
    return b"" if at < 0 else bytes(data[at : at + MAX_BUILDINFO_BYTES])


def _go_strings(info: bytes) -> tuple[str, str] | None:
    """(Go version, module information) from build information with inline strings."""
    if len(info) < GO_BUILDINFO_HEADER or not info[15] & GO_INLINE_STRINGS:
        return None
    found = []
    offset = GO_BUILDINFO_HEADER
    for _ in range(2):
        length = _varint(info, offset)
        if length is None or length[0] > MAX_GO_MODINFO:
            return None
        size, offset = length
        found.append(info[offset : offset + size].decode("utf-8", "replace"))
        offset += size
    return found[0], found[1]


def go_modules(data: Searchable, source: str) -> list[Sighting]:
    """The Kafka clients a Go executable was built with (`data`: its bytes or a memory
    map of it)."""
    strings = _go_strings(buildinfo(data))
    if strings is None:
        return []
    modules: dict[str, str] = {}
    last = ""
    for line in strings[1].splitlines()[:10_000]:
        parts = line.split("\t")
        if parts[0] == "dep" and len(parts) >= 3:
            last = parts[1]
            modules[last] = parts[2]
        elif parts[0] == "=>" and len(parts) >= 3 and last:
            modules[last] = parts[2]  # a replacement: the release actually built in
    found = []
    for path, version in modules.items():
        client = GO_MODULES.get(path)
        if client is not None and len(version) <= MAX_VERSION_CHARS:
            found.append(Sighting(client, version, source))
    return found


def java_classpath(entries: Iterable[str], source: str) -> list[Sighting]:
    """The kafka-clients releases among classpath `entries` (paths, URLs, jar names)."""
    found: dict[str, Sighting] = {}
    for entry in list(entries)[:10_000]:
        match = _JAR.search(entry[:4096])
        if match is not None:
            found.setdefault(match[1], Sighting("kafka-clients", match[1], source))
    return list(found.values())


def classpath_of(argv: Sequence[str], environment: Iterable[str] = ()) -> list[str]:
    """A Java command line's classpath entries (`-cp`, `-classpath`, `--class-path`, else
    the `CLASSPATH` variable of `environment`, `NAME=value` strings)."""
    for i, arg in enumerate(argv[:1000]):
        if arg in ("-cp", "-classpath", "--class-path") and i + 1 < len(argv):
            return argv[i + 1][:MAX_TEXT].split(":")
        if arg.startswith("--class-path="):
            return arg.split("=", 1)[1][:MAX_TEXT].split(":")
    for variable in environment:
        if variable.startswith("CLASSPATH="):
            return variable.split("=", 1)[1][:MAX_TEXT].split(":")
    return []


def package_json(data: bytes, source: str) -> list[Sighting]:
    """kafkajs's release from its package.json (`data`), if that is what it is."""
    try:
        doc = json.loads(data[:MAX_TEXT])
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    if not isinstance(doc, dict) or doc.get("name") != "kafkajs":
        return []
    version = doc.get("version")
    if not isinstance(version, str) or release(version) is None:
        return []
    return [Sighting("kafkajs", version, source)]


_DIST_INFO = re.compile(r"confluent_kafka-([0-9][0-9A-Za-z.+_]{0,63})\.dist-info")


def python_dist_info(names: Iterable[str], source: str) -> list[Sighting]:
    """librdkafka's release from the confluent-kafka wheel's dist-info directory `names`
    (a site-packages listing): the wheel bundles the librdkafka of its own version."""
    for name in list(names)[:10_000]:
        match = _DIST_INFO.fullmatch(name)
        if match is not None:
            return [Sighting("librdkafka", match[1], source)]
    return []
