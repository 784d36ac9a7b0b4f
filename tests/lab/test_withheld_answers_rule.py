"""The withheld-answers fault's pure parts: which connections it picks from `ss` output
and the rule it adds (data packets only: bare acknowledgements pass)."""

from __future__ import annotations

from hangwatch_lab.netfilter import ANSWER_MIN_BYTES, parse_ss_ports, withhold_rule

SS = """\
0 0 127.0.0.1:41000 127.0.0.1:9092 users:(("java",pid=321,fd=200))
0 0 [::ffff:10.0.0.5]:41002 [::ffff:10.0.0.1]:9092 users:(("java",pid=321,fd=201))
0 0 127.0.0.1:41004 127.0.0.1:9093 users:(("java",pid=321,fd=202))
0 0 127.0.0.1:41006 127.0.0.1:9092 users:(("python3",pid=3210,fd=9))
0 0 127.0.0.1:9092 127.0.0.1:41000 users:(("java",pid=321,fd=12))
"""


def test_only_the_process_own_connections_to_the_broker_port_are_picked() -> None:
    assert parse_ss_ports(SS, 321, 9092, None) == [41000, 41002]
    assert parse_ss_ports(SS, 321, 9092, "10.0.0.1") == [41002]
    assert parse_ss_ports(SS, 3210, 9092, None) == [41006]
    assert parse_ss_ports(SS, 999, 9092, None) == []
    assert parse_ss_ports("", 321, 9092, None) == []


def test_the_rule_drops_the_broker_data_to_that_connection_only() -> None:
    rule = withhold_rule(9092, 41000, "10.0.0.1")
    assert rule == [
        "-p", "tcp", "-s", "10.0.0.1", "--sport", "9092", "--dport", "41000",
        "-m", "length", "--length", f"{ANSWER_MIN_BYTES}:65535", "-j", "DROP",
    ]  # fmt: skip
    assert ANSWER_MIN_BYTES == 20 + 32 + 1  # IPv4 + TCP with timestamps, plus one byte
    assert "-s" not in withhold_rule(9092, 41000)
