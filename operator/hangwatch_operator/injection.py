"""Sidecar injection as a pure function: a pod and a policy in, JSONPatch ops out.

Fed by the mutating webhook in `webhook` (the pod under admission, the policy from
`policies.matching_policy`, the operator settings and the resolved injection mode).
The ops add the hangwatch sidecar, the shared telemetry emptyDir and the identity
environment, and nothing else: everything already in the pod stays as it was. Empty
when the pod opted out or was injected before, so reinvocation is harmless. The
sidecar also gets what it needs to read the Spark driver's REST API: the executor
container's `SPARK_DRIVER_URL` (copied as it is) and a `spark.ui.port` the job set
(`hangwatch.spark_driver` names both sides).

The pod is a Spark pod (its `spark-role` label) or a `producer` pod: one that is not
Spark's and opted in with the label `hangwatch.dev/producer: "true"` (a producer
service's Deployment or StatefulSet pod). Such a pod's producers run in the container
its annotation `hangwatch.dev/container` names, else in its first container
(`producer_container_index`); an annotation naming no container of the pod leaves the
pod as it is, with one warning. Everything else (the sidecar container, its user, its
Pod Security) is built by the same code for both.

Lifecycle, so that executor pods still finish:
- native: the sidecar is an init container with `restartPolicy: Always` (Kubernetes
  native sidecar); kubelet starts it before the executor and stops it once the
  executor container has ended, and it never holds the pod in Running.
- legacy (API servers before 1.29): a regular container plus `shareProcessNamespace:
  true`; `hangwatch sidecar --exit-when-gone <fragment>` exits 0 once no process whose
  command line contains the executor's main class is left, so the pod completes.
  A `producer` pod's sidecar has no such end: with the pod's `restartPolicy: Always`
  (every Deployment and StatefulSet pod) the pod only ever ends as a whole, so the
  sidecar needs none. A `producer` pod with another restart policy (a Job's pod) is
  injected only natively (legacy would keep it running once its producer ended): in
  legacy mode it is left as it is, with one warning.

Privileges (docs/threat-model.md): by default the sidecar passes the restricted Pod
Security Standard, so the injection never makes a pod inadmissible: no capability
(`drop: [ALL]`), `allowPrivilegeEscalation: false`, `runAsNonRoot`, seccomp
`RuntimeDefault`, a read-only root filesystem. It runs as the executor container's own
user and group when the pod declares them (the container's `securityContext`, else the
pod's; never root), else as 65532: the same user reads the executor's /proc and can use
the JVM's attach mechanism without any capability. The pod's process namespace is
shared (`shareProcessNamespace: true`, admitted by every level): legacy injection needs
it to see the executor end, and same-user evidence needs the executor's processes
visible.

The Python stack view (policy `processView.enabled`, off by default) is the one
feature that needs more: ptrace for the sidecar's py-spy only: `SYS_PTRACE` in the
sidecar's bounding set and `allowPrivilegeEscalation: true` (the image gives that
capability to the py-spy binary alone, a file capability, which takes effect on exec
only with escalation allowed); the sidecar's own Python process runs with no effective
capability. Only the privileged level admits it: `left_out` (what the namespace's level
forbids, `hangwatch.pod_security`) removes it and names it to the sidecar
(`NOT_JUDGED_ENV`), whose /status then says what the pod cannot judge.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from hangwatch import spark_driver
from hangwatch.pod_security import NOT_JUDGED_ENV, Feature, Level, forbidden, format_not_judged
from hangwatch.wire import sidecar_http
from hangwatch_operator.policies import Policy, Role, pod_role
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_producer.wire import telemetry

SIDECAR_CONTAINER = "hangwatch-sidecar"
TELEMETRY_VOLUME = "hangwatch-telemetry"
PORT_NAME = "hangwatch"
INJECT_ANNOTATION = "hangwatch.dev/inject"
"""Opt-out: a pod annotated `hangwatch.dev/inject: "false"` is never injected."""
INJECTED_ANNOTATION = "hangwatch.dev/injected"
"""Set on injection to the policy's name; its presence makes injection a no-op."""
MODE_ANNOTATION = "hangwatch.dev/injection-mode"
POLICY_LABEL = "hangwatch.dev/policy"
"""Pod label the operator selects watched pods by."""
CONTAINER_ANNOTATION = "hangwatch.dev/container"
"""On a `producer` pod: the name of the container whose producers the sidecar watches."""
SIDECAR_COMMAND = ("hangwatch", "sidecar")
BOOTSTRAP_FLAG = "--bootstrap"
"""The sidecar's flag for the policy's bootstrap list (the operator checks it, `watched`)."""
SPARK_CONTAINERS = frozenset({"spark-kubernetes-executor", "spark-kubernetes-driver"})
"""Spark's default container names; with pod templates, `SPARK_EXECUTOR_ID` finds it."""
SIDECAR_UID = 65532
"""The sidecar's user (and group) when the pod declares none for the executor: the
conventional `nonroot` user of distroless images."""

_DOWNWARD = {
    "HANGWATCH_POD_NAME": "metadata.name",
    "HANGWATCH_POD_NAMESPACE": "metadata.namespace",
    "HANGWATCH_NODE_NAME": "spec.nodeName",
}
_SIDECAR_DOWNWARD = {
    **_DOWNWARD,
    "HANGWATCH_EXECUTOR_ID": "metadata.labels['spark-exec-id']",
    "HANGWATCH_APPLICATION_ID": "metadata.labels['spark-app-selector']",
}


class InjectionConflictError(ValueError):
    """The pod already uses a name or port the sidecar needs; it is left as it is."""


NATIVE_SIDECAR_FIRST_MINOR = 28
"""The first Kubernetes 1.x minor that knows an init container's `restartPolicy` (alpha,
behind the SidecarContainers feature gate; on by default from 1.29). An older API server
refuses every pod carrying a native sidecar (`spec.initContainers[0].livenessProbe:
Forbidden: may not be set for init containers`, seen on v1.25.4)."""


def chosen_injection_mode(policy_mode: InjectionMode, settings: OperatorSettings) -> InjectionMode:
    """The policy's choice, else the operator's (AUTO if neither chose)."""
    return policy_mode if policy_mode is not InjectionMode.AUTO else settings.injection_mode


def resolve_injection_mode(
    policy_mode: InjectionMode, settings: OperatorSettings, server_minor: int | None
) -> InjectionMode:
    """NATIVE or LEGACY: the policy's choice, else the operator's, else by server version.

    An unknown server version resolves to LEGACY, which works on every version. A forced
    NATIVE on a server known to predate native sidecars (`NATIVE_SIDECAR_FIRST_MINOR`)
    resolves to LEGACY too: honouring it would make every executor pod inadmissible
    (`forced_native_note` says so in the admission response).
    """
    chosen = chosen_injection_mode(policy_mode, settings)
    if chosen is InjectionMode.NATIVE and _predates_native(server_minor):
        return InjectionMode.LEGACY
    if chosen is not InjectionMode.AUTO:
        return chosen
    if server_minor is not None and server_minor >= settings.native_sidecar_min_minor:
        return InjectionMode.NATIVE
    return InjectionMode.LEGACY


def _predates_native(server_minor: int | None) -> bool:
    return server_minor is not None and server_minor < NATIVE_SIDECAR_FIRST_MINOR


def forced_native_note(
    policy_mode: InjectionMode, settings: OperatorSettings, server_minor: int | None
) -> str | None:
    """Why a forced NATIVE was injected as LEGACY, or None."""
    if chosen_injection_mode(policy_mode, settings) is InjectionMode.NATIVE and _predates_native(
        server_minor
    ):
        return (
            f"native sidecars need Kubernetes 1.{NATIVE_SIDECAR_FIRST_MINOR} or later (this API "
            f"server is 1.{server_minor}): the legacy sidecar was injected instead"
        )
    return None


def server_minor_version(major: str, minor: str) -> int | None:
    """The 1.x minor of `/version` (`"29+"` on EKS/GKE counts as 29); None if not 1.x."""
    digits = "".join(c for c in minor if c.isdigit())
    if major.strip() != "1" or not digits:
        return None
    return int(digits)


def is_opted_out(pod: Mapping[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(INJECT_ANNOTATION, "")).strip().lower() == "false"


def is_injected(pod: Mapping[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    spec = pod.get("spec") or {}
    names = {c.get("name") for c in spec.get("containers") or []}
    names |= {c.get("name") for c in spec.get("initContainers") or []}
    return INJECTED_ANNOTATION in annotations or SIDECAR_CONTAINER in names


def spark_container_indexes(pod: Mapping[str, Any]) -> list[int]:
    """Indexes of the containers that run Spark (and so the producers); the first if unsure."""
    containers = (pod.get("spec") or {}).get("containers") or []
    found = [
        i
        for i, c in enumerate(containers)
        if c.get("name") in SPARK_CONTAINERS
        or any(e.get("name") == "SPARK_EXECUTOR_ID" for e in c.get("env") or [])
    ]
    return found or ([0] if containers else [])


def producer_container_index(pod: Mapping[str, Any]) -> int:
    """Index of a `producer` pod's container whose producers the sidecar watches: the one
    `CONTAINER_ANNOTATION` names, else the first. `InjectionConflictError` when the
    annotation names no container of the pod (the value is not repeated: it is the pod
    creator's text) or the pod has no container."""
    containers = (pod.get("spec") or {}).get("containers") or []
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if CONTAINER_ANNOTATION not in annotations:
        if not containers:
            raise InjectionConflictError("the pod has no container")
        return 0
    wanted = annotations[CONTAINER_ANNOTATION]
    for index, container in enumerate(containers):
        if (
            isinstance(wanted, str)
            and isinstance(container, Mapping)
            and container.get("name") == wanted
        ):
            return index
    raise InjectionConflictError(f"annotation {CONTAINER_ANNOTATION} names no container of the pod")


def producer_container_indexes(pod: Mapping[str, Any], mode: InjectionMode) -> list[int]:
    """The containers whose producers the sidecar watches in `pod` (`mode` resolved):
    Spark's (`spark_container_indexes`), or a `producer` pod's one container, which
    must fit `mode` (see the module docstring); `InjectionConflictError` otherwise."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if pod_role(labels) != Role.PRODUCER:
        return spark_container_indexes(pod)
    index = producer_container_index(pod)
    restart = (pod.get("spec") or {}).get("restartPolicy") or "Always"
    if mode is InjectionMode.LEGACY and restart != "Always":
        raise InjectionConflictError(
            "a producer pod whose restartPolicy is not Always needs native sidecars "
            f"(Kubernetes 1.{NATIVE_SIDECAR_FIRST_MINOR}+ with injectionMode native or auto)"
        )
    return [index]


def sidecar_args(
    policy: Policy, settings: OperatorSettings, mode: InjectionMode, *, spark: bool = True
) -> list[str]:
    """Command-line arguments of `hangwatch sidecar`, from the policy; `spark`: the pod
    is Spark's (only then does a legacy sidecar exit with the executor)."""
    kafka, probes, det = policy.kafka, policy.probes, policy.detection
    args = [BOOTSTRAP_FLAG, ",".join(kafka.bootstrap_servers)]
    if kafka.topics:
        args += ["--topics", ",".join(kafka.topics)]
    numbers = {
        "--port": settings.sidecar_port,
        "--probe-interval-seconds": probes.probe_interval_seconds,
        "--stall-seconds": det.stall_seconds,
        "--heartbeat-seconds": det.heartbeat_seconds,
        "--metadata-max-age-seconds": det.metadata_max_age_seconds,
        "--election-grace-seconds": det.election_grace_seconds,
        "--producer-request-timeout-seconds": det.producer_request_timeout_seconds,
        "--time-to-error-budget-seconds": det.time_to_error_budget_seconds,
    }
    for flag, value in numbers.items():
        args += [flag, str(value)]
    if det.expected_write_interval_seconds is not None:
        args += ["--expected-write-interval-seconds", str(det.expected_write_interval_seconds)]
    args += ["--telemetry-dir", settings.telemetry_dir]
    if mode is InjectionMode.LEGACY and spark:
        args += ["--exit-when-gone", settings.legacy_exit_when_gone]
    return args


def policy_features(policy: Policy) -> frozenset[Feature]:
    """The features of `policy` whose injection needs more than the restricted level."""
    return frozenset({Feature.PROCESS_VIEW} if policy.process_view.enabled else ())


def features_left_out(policy: Policy, level: Level) -> tuple[Feature, ...]:
    """The features of `policy` the webhook leaves out of pods in a namespace enforcing
    `level`: what the level forbids (the pods are admitted without them)."""
    return forbidden(policy_features(policy), level)


def sidecar_container(
    policy: Policy,
    settings: OperatorSettings,
    mode: InjectionMode,
    left_out: Collection[Feature] = (),
    identity: tuple[int, int] = (SIDECAR_UID, SIDECAR_UID),
    *,
    spark: bool = True,
) -> dict[str, Any]:
    """The sidecar container (an init container with restartPolicy Always when native),
    without the features in `left_out`, running as `identity` (uid, gid); `spark`: the
    pod is Spark's (`sidecar_args`)."""
    uid, gid = identity
    probe = {"httpGet": {"path": sidecar_http.HEALTHZ_PATH, "port": PORT_NAME}, "timeoutSeconds": 2}
    container: dict[str, Any] = {
        "name": SIDECAR_CONTAINER,
        "image": policy.sidecar.image or settings.sidecar_image,
        "command": list(SIDECAR_COMMAND),
        "args": sidecar_args(policy, settings, mode, spark=spark),
        "ports": [{"name": PORT_NAME, "containerPort": settings.sidecar_port, "protocol": "TCP"}],
        "env": _sidecar_env(policy, settings, left_out),
        "resources": _resources(policy),
        "volumeMounts": [
            {"name": TELEMETRY_VOLUME, "mountPath": settings.telemetry_dir, "readOnly": True}
        ],
        "readinessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**probe, "initialDelaySeconds": 10, "periodSeconds": 20},
        # No capability: the socket view's sock_diag netlink dump of the pod's own network
        # namespace (shared by every container of the pod, native or legacy injection) is
        # answered to any user; same-user /proc reads need none either.
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": gid,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if Feature.PROCESS_VIEW in policy_features(policy) - set(left_out):
        security = container["securityContext"]
        security["capabilities"] = {"drop": ["ALL"], "add": ["SYS_PTRACE"]}
        security["allowPrivilegeEscalation"] = True  # py-spy's file capability on exec
    if policy.sidecar.image_pull_policy:
        container["imagePullPolicy"] = policy.sidecar.image_pull_policy
    if mode is InjectionMode.NATIVE:
        container["restartPolicy"] = "Always"
    return container


def build_sidecar_patch(
    pod: Mapping[str, Any],
    policy: Policy,
    settings: OperatorSettings,
    mode: InjectionMode,
    left_out: Collection[Feature] = (),
) -> list[dict[str, Any]]:
    """JSONPatch ops that inject the sidecar into `pod`; [] if opted out or already injected.

    `mode` must be resolved (NATIVE or LEGACY, see `resolve_injection_mode`); `left_out`
    are the policy's features the namespace's Pod Security level forbids. Raises
    `InjectionConflictError` when the pod already uses the telemetry volume's name or
    the sidecar's port for something else, or is a `producer` pod whose container
    annotation or restart policy does not fit (`producer_container_indexes`).
    """
    if mode is InjectionMode.AUTO:
        raise ValueError("resolve the injection mode before building the patch")
    if is_opted_out(pod) or is_injected(pod):
        return []
    spec = pod.get("spec") or {}
    _check_conflicts(spec, settings)
    watched = producer_container_indexes(pod, mode)
    spark = pod_role((pod.get("metadata") or {}).get("labels") or {}) != Role.PRODUCER
    ops = _metadata_ops(pod.get("metadata") or {}, policy, settings, mode)
    if not spec.get("hostPID") and spec.get("shareProcessNamespace") is not True:
        ops.append(_add("/spec/shareProcessNamespace", True))  # hostPID already shares
    ops.append(_append(spec, "/spec/volumes", {"name": TELEMETRY_VOLUME, "emptyDir": {}}))
    spark_containers = [(i, spec["containers"][i]) for i in watched]
    for index, container in spark_containers:
        ops += _spark_container_ops(container, index, settings)
    target = "initContainers" if mode is InjectionMode.NATIVE else "containers"
    identity = executor_identity(spec, [c for _, c in spark_containers])
    sidecar = sidecar_container(policy, settings, mode, left_out, identity, spark=spark)
    sidecar["env"] += driver_env(container for _, container in spark_containers)
    ops.append(_append(spec, f"/spec/{target}", sidecar))
    return ops


def executor_identity(
    spec: Mapping[str, Any], spark_containers: Iterable[Mapping[str, Any]]
) -> tuple[int, int]:
    """(uid, gid) the sidecar runs as: the first Spark container's declared user and group
    (its `securityContext`, else the pod's), `SIDECAR_UID` for what neither declares.

    Never root: a uid of 0 (or a value that is not a non-negative integer) is not
    copied, so the sidecar keeps `runAsNonRoot` and its own user. A group of 0 is copied:
    it grants the sidecar nothing the executor's files do not already grant its group.
    """
    pod_context = spec.get("securityContext")
    contexts = [*[c.get("securityContext") for c in spark_containers][:1], pod_context]
    uid = _declared(contexts, "runAsUser", minimum=1)
    gid = _declared(contexts, "runAsGroup", minimum=0)
    return (SIDECAR_UID if uid is None else uid, SIDECAR_UID if gid is None else gid)


def _declared(contexts: Iterable[Any], key: str, minimum: int) -> int | None:
    """The first context's `key` that declares it; None if that value is unusable."""
    for context in contexts:
        if isinstance(context, dict) and context.get(key) is not None:
            value = context[key]
            ok = isinstance(value, int) and not isinstance(value, bool)
            return value if ok and minimum <= value <= MAX_ID else None
    return None


MAX_ID = 2**31 - 1
"""Largest uid/gid the API server accepts in a securityContext."""

_COPYABLE_SOURCES = frozenset({"fieldRef", "configMapKeyRef", "secretKeyRef"})
"""`valueFrom` sources that mean the same in any container of the pod."""


def driver_env(spark_containers: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sidecar's Spark driver variables from the Spark containers' environment
    (`spark_container_indexes`): their `SPARK_DRIVER_URL` (a value, or a pod-level
    `valueFrom`) and the port of a `SPARK_JAVA_OPT_<n>=-Dspark.ui.port=<port>`; nothing
    when Spark set neither."""
    found: dict[str, dict[str, Any]] = {}
    for container in spark_containers:
        for env in container.get("env") or []:
            name, value, source = env.get("name"), env.get("value"), env.get("valueFrom")
            if name == spark_driver.EXECUTOR_DRIVER_URL_ENV:
                if isinstance(value, str) and value:
                    found[spark_driver.SIDECAR_DRIVER_URL_ENV] = {"value": value}
                elif isinstance(source, dict) and set(source) <= _COPYABLE_SOURCES and source:
                    found[spark_driver.SIDECAR_DRIVER_URL_ENV] = {
                        "valueFrom": copy.deepcopy(source)
                    }
            elif str(name).startswith(spark_driver.EXECUTOR_JAVA_OPT_PREFIX) and isinstance(
                value, str
            ):
                port = spark_driver.ui_port_from_java_opt(value)
                if port is not None:
                    found[spark_driver.SIDECAR_UI_PORT_ENV] = {"value": str(port)}
    return [{"name": name, **source} for name, source in sorted(found.items())]


def apply_add_ops(document: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """Apply the `add` ops of `build_sidecar_patch` to `document` in place (RFC 6902)."""
    for op in ops:
        if op["op"] != "add":
            raise ValueError(f"only add ops are produced here, got {op['op']!r}")
        *parents, last = [_unescape(t) for t in op["path"].split("/")[1:]]
        target: Any = document
        for token in parents:
            target = target[int(token)] if isinstance(target, list) else target[token]
        value = copy.deepcopy(op["value"])
        if isinstance(target, list):
            target.insert(len(target) if last == "-" else int(last), value)
        else:
            target[last] = value


def _check_conflicts(spec: Mapping[str, Any], settings: OperatorSettings) -> None:
    if any(v.get("name") == TELEMETRY_VOLUME for v in spec.get("volumes") or []):
        raise InjectionConflictError(f"the pod already has a volume named {TELEMETRY_VOLUME}")
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for port in container.get("ports") or []:
            if port.get("containerPort") == settings.sidecar_port:
                raise InjectionConflictError(
                    f"container {container.get('name')} already uses port {settings.sidecar_port}"
                )


def _metadata_ops(
    meta: Mapping[str, Any], policy: Policy, settings: OperatorSettings, mode: InjectionMode
) -> list[dict[str, Any]]:
    annotations = {INJECTED_ANNOTATION: policy.name, MODE_ANNOTATION: mode.value}
    existing = meta.get("annotations") or {}
    if not any(key.startswith("prometheus.io/") for key in existing):
        annotations |= {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(settings.sidecar_port),
            "prometheus.io/path": sidecar_http.METRICS_PATH,
        }
    return [
        *_map_ops(meta, "annotations", annotations),
        *_map_ops(meta, "labels", {POLICY_LABEL: policy.name}),
    ]


def _spark_container_ops(
    container: Mapping[str, Any], index: int, settings: OperatorSettings
) -> list[dict[str, Any]]:
    base = f"/spec/containers/{index}"
    ops = [
        _append(
            container,
            f"{base}/volumeMounts",
            {"name": TELEMETRY_VOLUME, "mountPath": settings.telemetry_dir},
        )
    ]
    present = {e.get("name") for e in container.get("env") or []}
    wanted = [_value_env(telemetry.DIR_ENV, settings.telemetry_dir)]
    wanted += [_field_env(name, path) for name, path in _DOWNWARD.items()]
    env = [e for e in wanted if e["name"] not in present]
    if env and container.get("env") is None:  # absent or null: create the list
        ops.append(_add(f"{base}/env", env))
    elif env:
        ops += [_add(f"{base}/env/-", e) for e in env]
    return ops


def _sidecar_env(
    policy: Policy, settings: OperatorSettings, left_out: Collection[Feature]
) -> list[dict[str, Any]]:
    env = [_value_env(telemetry.DIR_ENV, settings.telemetry_dir)]
    env += [_field_env(name, path) for name, path in _SIDECAR_DOWNWARD.items()]
    # Timeouts ride in the sidecar's settings variables rather than flags, outside the
    # fixed flag contract: a sidecar that does not know them ignores them.
    probes = policy.probes
    env.append(
        _value_env("HANGWATCH_CONNECT_TIMEOUT_MS", str(probes.connect_timeout_seconds * 1000))
    )
    env.append(
        _value_env("HANGWATCH_REQUEST_TIMEOUT_MS", str(probes.request_timeout_seconds * 1000))
    )
    env.append(
        _value_env(
            "HANGWATCH_FRESH_CONNECT_INTERVAL_SECONDS", str(probes.fresh_connect_interval_seconds)
        )
    )
    features = policy_features(policy)
    stacks = Feature.PROCESS_VIEW in features - set(left_out)
    env.append(_value_env("HANGWATCH_PYTHON_STACKS", "true" if stacks else "false"))
    if not_judged := format_not_judged(features & set(left_out)):
        env.append(_value_env(NOT_JUDGED_ENV, not_judged))
    view = policy.socket_view
    env.append(_value_env("HANGWATCH_SOCKET_VIEW", "true" if view.enabled else "false"))
    if view.ports:
        env.append(_value_env("HANGWATCH_SOCKET_PORTS", ",".join(map(str, view.ports))))
    if view.uids:
        env.append(_value_env("HANGWATCH_SOCKET_UIDS", ",".join(map(str, view.uids))))
    kafka = policy.kafka
    env.append(_value_env("HANGWATCH_KAFKA_SECURITY_PROTOCOL", kafka.security_protocol))
    if kafka.sasl_mechanism:
        env.append(_value_env("HANGWATCH_KAFKA_SASL_MECHANISM", kafka.sasl_mechanism))
    for ref in kafka.secret_properties:
        key_ref = {"name": ref.secret_name, "key": ref.secret_key, "optional": False}
        env.append({"name": ref.env_name, "valueFrom": {"secretKeyRef": key_ref}})
    return env


def _resources(policy: Policy) -> dict[str, dict[str, str]]:
    wanted = {"requests": policy.sidecar.requests, "limits": policy.sidecar.limits}
    return {kind: dict(values) for kind, values in wanted.items() if values}


def _value_env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _map_ops(meta: Mapping[str, Any], key: str, values: dict[str, str]) -> list[dict[str, Any]]:
    if meta.get(key) is None:
        return [_add(f"/metadata/{key}", values)]
    return [_add(f"/metadata/{key}/{_escape(k)}", v) for k, v in values.items()]


def _append(parent: Mapping[str, Any], path: str, item: dict[str, Any]) -> dict[str, Any]:
    """Append to the list at `path`, creating it when the parent has none."""
    if parent.get(path.rsplit("/", 1)[1]) is None:
        return _add(path, [item])
    return _add(f"{path}/-", item)


def _add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _escape(key: str) -> str:
    """A JSON Pointer token (RFC 6901): `~` -> `~0`, `/` -> `~1`."""
    return key.replace("~", "~0").replace("/", "~1")
