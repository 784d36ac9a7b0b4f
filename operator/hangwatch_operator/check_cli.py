"""`hangwatch check`: does this hangwatch install work? One line per check, like `linkerd check`.

Registered in `hangwatch.cli`. Reads the cluster of the current kubeconfig (or
`--kubeconfig`, or the pod's service account) with `install_survey`, judges it with
`install_checks`, prints each check as a mark, its name and what was seen, with a
hint under every warning and failure (`--output json`: one document). Exit code 0
when nothing failed (warnings allowed), 1 when a check failed, 2 when the API server
does not answer, 3 on bad input; never a traceback. docs/check.md lists the checks.
"""

from __future__ import annotations

import argparse
import json
import sys

from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError
from hangwatch_operator.install_checks import run_checks
from hangwatch_operator.install_model import MARKS, Result, Status, worst
from hangwatch_operator.install_survey import Cluster, survey

DEFAULT_NAMESPACE = "hangwatch-system"
"""The README's `helm install ... -n hangwatch-system`."""


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig (default: KUBECONFIG, ~/.kube/config, or the pod's service account)",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default=DEFAULT_NAMESPACE,
        help=f"namespace of the install (default {DEFAULT_NAMESPACE})",
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument(
        "--max-sidecars",
        type=int,
        default=20,
        metavar="N",
        help="ask at most N injected pods' sidecars for /status (default 20)",
    )
    parser.add_argument(
        "--timeout-seconds",
        type=float,
        default=5.0,
        metavar="S",
        help="patience for each API call and probe (default 5)",
    )


def run(args: argparse.Namespace) -> int:
    if not 0 < args.timeout_seconds <= 300 or not 0 <= args.max_sidecars <= 10000:
        raise UsageError("--timeout-seconds must be in (0, 300], --max-sidecars in 0..10000")
    cluster = Cluster.connect(args.kubeconfig, args.timeout_seconds)
    text = args.output == "text"

    def progress(step: str) -> None:
        if text and sys.stderr.isatty():
            print(f"hangwatch check: reading {step} ...", file=sys.stderr)

    try:
        found = survey(
            cluster,
            args.namespace,
            max_sidecars=args.max_sidecars,
            timeout_seconds=args.timeout_seconds,
            progress=progress,
        )
    finally:
        cluster.close()
    results = run_checks(found)
    overall = worst(results)
    if text:
        print(render(results, overall))
    else:
        print(json.dumps(report(results, overall, args.namespace), indent=2))
    return ExitCode.DEGRADED if overall is Status.FAIL else ExitCode.OK


def render(results: list[Result], overall: Status) -> str:
    """The text report: one line per check, a hint under each warning and failure."""
    lines = []
    for result in results:
        lines.append(f"{MARKS[result.status]} {result.check}: {result.detail}")
        if result.hint and result.status in (Status.FAIL, Status.WARN):
            lines.append(f"    hint: {result.hint}")
    counts = {s: sum(r.status is s for r in results) for s in Status}
    summary = ", ".join(f"{counts[s]} {s.value}" for s in Status if counts[s])
    verdict = {Status.FAIL: "FAILED", Status.WARN: "passed with warnings"}.get(overall, "passed")
    lines.append(f"Status check results: {verdict} ({summary})")
    return "\n".join(lines)


def report(results: list[Result], overall: Status, namespace: str) -> dict[str, object]:
    """The `--output json` document."""
    return {
        "namespace": namespace,
        "status": overall.value,
        "checks": [r.as_json() for r in results],
    }
