"""`hangwatch operator`: run the whole operator (webhook + remediation) in this process.

Registered in `hangwatch.cli`. Reads `HANGWATCH_OPERATOR_*` settings, applies the
command-line overrides (`--dry-run`, `--metrics-port`), checks that Kubernetes
credentials exist (in-cluster service account or kubeconfig), then runs kopf with
the `webhook` and `handlers` modules, exactly as `kopf run` would. Bad settings and
missing credentials are one line on stderr and exit code 3, never a traceback.

High availability: run two replicas with `--peering hangwatch` (what the chart sets):
kopf's peering objects elect the replica with the highest `--priority` (random when
not given, so replicas of one Deployment never tie and all pause); the others
pause every handler, so exactly one polls sidecars and acts. Both keep serving the
admission webhook, each with its own list and watch of the policies (`policy_watch`,
which peering does not pause), covering the namespaces given here
(`OperatorSettings.watch_namespaces`). `--standalone` switches peering off (one
replica, local runs).

Past one replica: with `HANGWATCH_OPERATOR_SHARDS` above 0 (the chart's
`operator.sharding.enabled`) peering is off and every replica judges and remediates
the pods of the shards whose Lease it holds (`replica_leases`); `--peering` is then
refused.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import logging
import os
import random
import urllib.parse

import kopf
from kubernetes.aio import client, config

from hangwatch.errors import UsageError
from hangwatch_operator.settings import OperatorSettings, SettingsError

HANDLER_MODULES = ("hangwatch_operator.webhook", "hangwatch_operator.handlers")
DEFAULT_PEERING = "hangwatch"
"""Name of the (Cluster)KopfPeering object the chart installs for leader election."""


def register(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help="watch only this namespace (repeatable; glob patterns allowed)",
    )
    scope.add_argument(
        "-A", "--all-namespaces", action="store_true", help="watch every namespace (default)"
    )
    peering = parser.add_mutually_exclusive_group()
    peering.add_argument(
        "--peering",
        metavar="NAME",
        default=None,
        help=f"leader election among replicas through the kopf peering NAME (the chart "
        f"uses {DEFAULT_PEERING!r}); without it or --standalone kopf auto-detects",
    )
    peering.add_argument(
        "--standalone", action="store_true", help="no peering: this is the only replica"
    )
    parser.add_argument(
        "--priority", type=int, default=None, help="peering priority (highest one leads)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="treat every policy as safety.dryRun: decide and report, never act",
    )
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="port of /metrics (0: off; default 9478)"
    )
    parser.add_argument(
        "--liveness", metavar="URL", help="kopf liveness endpoint, e.g. http://0.0.0.0:8080/healthz"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")


def run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    liveness = liveness_endpoint(args.liveness)
    _check_credentials()
    for module in HANDLER_MODULES:
        importlib.import_module(module)
    kopf.configure(verbose=args.verbose)
    memo = kopf.Memo()
    memo["hangwatch_settings"] = settings
    namespaces = args.namespaces or ()
    if settings.shards and args.peering:
        raise UsageError(
            "--peering with sharding (HANGWATCH_OPERATOR_SHARDS above 0): every replica "
            "acts on the shards it holds; leave peering out"
        )
    standalone = bool(args.standalone or settings.shards)
    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        standalone=True if standalone else None,
        peering_name=args.peering,
        priority=peering_priority(args.priority, peering=not standalone),
        liveness_endpoint=liveness,
        memo=memo,
    )
    return 0


def liveness_endpoint(url: str | None) -> str | None:
    """`--liveness URL` checked as kopf will serve it: http(s), a host, a port 1..65535."""
    if url is None:
        return None
    problem = None
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port
    except ValueError as exc:  # a port out of range or not a number
        problem = str(exc)
    else:
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            problem = "expected http://HOST:PORT/PATH"
        elif port is None:
            problem = "no port (kopf serves the probe on the port given)"
    if problem is not None:
        raise UsageError(f"--liveness {url!r}: {problem}")
    return url


def peering_priority(requested: int | None, peering: bool) -> int | None:
    """The priority given, or with peering a random one: kopf pauses every replica that
    sees a peer of equal priority, and a Deployment cannot give replicas distinct values."""
    if requested is not None or not peering:
        return requested
    return random.SystemRandom().randint(1, 2**31 - 1)


def _settings(args: argparse.Namespace) -> OperatorSettings:
    try:
        settings = OperatorSettings.from_environ(os.environ)
        return dataclasses.replace(
            settings,
            watch_namespaces=tuple(args.namespaces or ()),  # what kopf is told to serve
            dry_run=settings.dry_run or args.dry_run,
            metrics_port=settings.metrics_port if args.metrics_port is None else args.metrics_port,
        )
    except SettingsError as exc:
        raise UsageError(f"invalid operator settings: {exc}") from exc


def _check_credentials() -> None:
    """Fail in one line when neither a service account nor a kubeconfig is usable."""

    async def probe() -> None:
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            await config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]

    noisy = logging.getLogger("kubernetes.aio.config.kube_config")  # "Config not found"
    level = noisy.level
    noisy.setLevel(logging.ERROR)
    try:
        asyncio.run(probe())
    except (config.ConfigException, OSError, ValueError) as exc:
        raise UsageError(
            f"no Kubernetes credentials (service account or kubeconfig): {exc}"
        ) from exc
    finally:
        noisy.setLevel(level)
