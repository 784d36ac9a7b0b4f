"""`--budget-seconds` decides the exit code; `--json` carries the same verdict.

Covers (real CLI in a subprocess): within the budget exits 0; over it exits 1 with an
OVER line; an unbounded worst case exits 1 with a budget and 0 without; no budget exits
0 even when the figure is large; the JSON document has the figure (null when
unbounded), the terms, warning codes and `within_budget`; secret values never appear
in either output; `--file` settings are read and `-X` overrides them.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.config_check.helpers import run_cli

SAFE = ["-X", "message.timeout.ms=20000", "-X", "bootstrap.servers=k1:9092"]


def test_within_budget_exits_zero() -> None:
    result = run_cli("--client", "librdkafka", *SAFE, "--budget-seconds", "30")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "budget 30 s: within (worst case 21 s)"


def test_over_budget_exits_one() -> None:
    result = run_cli("--client", "java", "--budget-seconds", "60")
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[-1] == "budget 60 s: OVER (worst case 180 s)"


def test_unbounded_exits_one_only_with_a_budget() -> None:
    unbounded = ["--client", "librdkafka", "-X", "message.timeout.ms=0"]
    assert run_cli(*unbounded, "--budget-seconds", "3600").returncode == 1
    assert run_cli(*unbounded).returncode == 0


def test_no_budget_exits_zero() -> None:
    assert run_cli("--client", "sarama", "--brokers", "5").returncode == 0


def test_json_document() -> None:
    result = run_cli(
        "--client", "sarama", "-X", "Addrs=a:1,b:2,c:3", "--budget-seconds", "60", "--json"
    )
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["client"] == "sarama" and doc["brokers"] == 3
    assert doc["worst_case_seconds"] == 30 + 0.1 + 4 * 3 * 30 + 0.75
    assert doc["within_budget"] is False and doc["budget_seconds"] == 60
    assert doc["terms"][0]["name"] == "in-flight produce fails"
    assert "retries-exceed-budget" in [w["code"] for w in doc["warnings"]]


def test_json_unbounded_is_null() -> None:
    result = run_cli("--client", "librdkafka", "-X", "message.timeout.ms=0", "--json")
    doc = json.loads(result.stdout)
    assert doc["worst_case_seconds"] is None and doc["unbounded"] is True
    assert doc["within_budget"] is None


def test_secrets_are_never_printed(tmp_path: Path) -> None:
    props = tmp_path / "producer.properties"
    props.write_text("sasl.password=hunter2\nsasl.username=svc\n", encoding="utf-8")
    for extra in ([], ["--json"]):
        result = run_cli("--client", "librdkafka", "--file", str(props), *extra)
        assert result.returncode == 0, result.stderr
        assert "hunter2" not in result.stdout + result.stderr
    doc = json.loads(run_cli("--client", "librdkafka", "--file", str(props), "--json").stdout)
    assert doc["config"]["sasl.password"] == "[redacted]"


def test_file_is_read_and_x_overrides_it(tmp_path: Path) -> None:
    props = tmp_path / "producer.properties"
    props.write_text(
        "# sarama settings\n! also a comment\n\nNet.DialTimeout: 10s\nNet.WriteTimeout = 2s\n"
        "Producer.Retry.Max 1\n",
        encoding="utf-8",
    )
    result = run_cli("--client", "sarama", "--file", str(props), "-X", "Net.DialTimeout=5s")
    assert result.returncode == 0, result.stderr
    assert "(3 + 1) x 1 x 5s" in result.stdout
    assert result.stdout.startswith("worst case until a send reports an error: 22.85 s")
