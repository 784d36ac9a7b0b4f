"""hangwatch installed as a user installs it: from a registry and a package index, never a checkout.

The tier releases this version once (`released`: `make release`, the wheels, sdists,
chart, image, jar, SBOMs and SHA256SUMS into a scratch dist/; its image is the one every
node test runs); the module starts a real OCI registry (the CNCF
distribution server) and a real package index (pypiserver, uploads with a password) on
loopback, and publishes to them with `make publish` (the index's password from the
environment, never in its output). Then, with nothing of the repository on the path:

- the chart pulled from the registry renders exactly as the repository's chart;
- `hangwatch-producer` from the index installs and imports on Debian bullseye's Python
  3.9 (tests/producer_package's cached root);
- the README's install block, read from README.md: `helm install` of the published
  chart (`oci://`, `--version`), the image repositories pointed at the registry;
  `pip install 'hangwatch[operator]==V'` into a fresh virtualenv with pip pointed at the
  index (`PIP_INDEX_URL`, what a user's pip.conf says: projects it does not hold come from
  PyPI through it); the operator run from that virtualenv as the installed Deployment
  says; an executor pod whose image and injected sidecar containerd pulls from the
  registry; the README's `hangwatch check` from that virtualenv passes every check;
- the example's Spark image (examples/spark-on-kubernetes/Dockerfile) built for real on a
  stock-like Apache Spark 3.5.7 image (`hangwatch_testing.stock_spark`: Debian bullseye's
  Python 3.9), pip installing `hangwatch-producer` from the index, pushed to the
  registry; the example's spark-submit.sh submits its job with it (the 3.5 line's own
  spark-submit) to a real Kafka cluster on the node IP: each executor's sidecar says
  healthy while its task writes, the job ends cleanly, every event is read back, nothing
  is restarted or replaced (the 3.5 line's run on Kubernetes);
- the README's uninstall block, with the node cordoned as hangwatch cordons it: nothing is
  left (no CRD of hangwatch or kopf, peering object, Lease, webhook configuration,
  cluster role or binding, namespace, node taint, label, annotation or cordon; the
  virtualenv holds no hangwatch).

The last three share one install (the `installed` fixture: the README's install block
and the operator), each a test of its own: the pod and `hangwatch check`, the example's
job, the uninstall (last: it takes everything away).

It runs first in the node group (tests/node/conftest.py), on a node of its own (a fresh
node, as a user's; stopped before the session's node starts): the kubelet remembers under
which names it pulled an image, and would not take the other modules' imported copy of
the same image as preloaded after this module pulled it from the registry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import helm_python
import pytest
from kubernetes import client

from hangwatch_lab.kafka import KafkaLab
from hangwatch_operator.actuation import cordon_patch
from hangwatch_testing import scripts
from hangwatch_testing.bullseye import python39_root
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import ROOT
from hangwatch_testing.kube.readme import block_commands, parse_helm
from hangwatch_testing.kube.release import NAMESPACE, HelmRelease, admin_api, running_operator
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.components import NODE_NAME
from hangwatch_testing.node.workloads import (
    create_pod,
    ensure_namespace,
    executor_for,
    policy,
    read_pod,
    submit_driver,
    wait_for,
    wait_operator_ready,
)
from hangwatch_testing.pythons import python_3_10
from hangwatch_testing.registries import OciRegistry, PackageIndex, oci_registry, package_index
from hangwatch_testing.silent_broker import SilentBroker
from hangwatch_testing.stock_spark import STOCK_LINE, STOCK_PYTHON, build_example_image
from tests.node.started import started_node
from tests.node.test_spark_submit.faults import sidecar_status, writing_executors
from tests.node.test_spark_submit.submission import (
    POLICY_NAME,
    SPARK_NAMESPACE,
    TOPIC,
    PodRecorder,
    Submission,
    ended_cleanly,
    every_event_read_back,
    prepare_namespace,
    remove_pods,
)

pytestmark = [pytest.mark.xdist_group("node"), pytest.mark.timeout(2400)]

release_script = scripts.load("release")
VERSION = release_script.project_version()
README = ROOT / "README.md"
INSTALL = "## Install on your cluster"
UNINSTALL = "### Uninstall"
JOBS = "installed-from-registries"
POLICY = "published"
POLICIES = f"/apis/hangwatch.dev/v1alpha1/namespaces/{JOBS}/producerhealthpolicies"
MERGE = "application/merge-patch+json"
EXAMPLE_JOB = ("--rate", "200/s", "--duration", "30s", "--partitions", "2")
EXAMPLE_EVENTS = 6000
"""The example job's run: paced, so the sidecars are asked while both tasks write."""


@dataclass(frozen=True)
class Published:
    registry: OciRegistry
    index: PackageIndex
    dist: Path
    example_image: str
    """The example's Spark image in the registry, once `example_build` is done."""
    example_build: Future[tuple[float, str]]
    """`build_example_image`, started once the release is published: it runs while the
    module's first tests and the install run (the node tier ends the suite alone, so a
    core is free), and the job waits for it."""


def _run(command: list[str], env: dict[str, str] | None = None, timeout: float = 1500) -> str:
    """`command`, its output printed as progress; its stdout and stderr returned."""
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    output = done.stdout + done.stderr
    print(f"$ {' '.join(command)}  ({time.monotonic() - started:.0f} s, exit {done.returncode})")
    assert done.returncode == 0, output[-4000:]
    return output


@pytest.fixture(scope="module")
def node() -> Iterator[NodeCluster]:
    """A node of this module's own (see the module's docstring)."""
    yield from started_node("the install from registries")


@pytest.fixture(scope="module")
def published(node: NodeCluster, released: Path) -> Iterator[Published]:
    """This version's release (the tier's `released`), a registry and an index running,
    the release published to both with `make publish`."""
    assert not node.exists(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/producerhealthpolicies.hangwatch.dev"
    ), "the chart is installed already: this module must run before the session's release"
    dist = released
    make = ["make", "--no-print-directory", "-C", str(ROOT), f"PY={sys.executable}"]
    with oci_registry() as registry, package_index() as index:
        node.trust_plain_http_registry(registry.host)
        secrets = {"TWINE_USERNAME": index.username, "TWINE_PASSWORD": index.password}
        out = _run(
            [
                *make, "publish", f"DIST={dist}", f"REGISTRY={registry.host}",
                f"INDEX={index.url}", "PLAIN_HTTP=1",
            ],
            env={**os.environ, **secrets},
        )  # fmt: skip
        assert index.password not in out
        image = f"{registry.host}/data/orders-enricher:{VERSION}"
        with ThreadPoolExecutor(1, thread_name_prefix="example-image") as pool:
            build = pool.submit(build_example_image, image, index.simple)
            yield Published(registry, index, dist, image, build)


@pytest.fixture(scope="module")
def example_image(published: Published) -> str:
    """examples/spark-on-kubernetes/Dockerfile built for real, as a user builds it: on
    the stock-like Spark base (`hangwatch_testing.stock_spark`, Python 3.9), pip pointed
    at the index (`PIP_INDEX_URL`), its own `HANGWATCH_PRODUCER` default; then pushed to
    the registry (as the example's `registry.example.com/data/orders-enricher`). The
    build started with `published`; this waits for its end."""
    started = time.monotonic()
    took, installed = published.example_build.result(timeout=1800)
    waited = time.monotonic() - started
    print(
        f"the example's image built from the index and pushed in {took:.0f} s "
        f"(waited {waited:.0f} s for it): {installed}"
    )
    assert installed == f"hangwatch-producer {VERSION}"
    return published.example_image


def test_what_was_published_is_this_release(published: Published, tmp_path: Path) -> None:
    """The registry holds the image and the chart, the index both distributions, each
    byte for byte the release's; the pulled chart renders as the repository's."""
    host = published.registry.host
    catalog = json.loads(urllib.request.urlopen(f"http://{host}/v2/_catalog").read())
    example = published.example_image.split("/", 1)[1].rsplit(":", 1)[0]  # its build may be done
    assert set(catalog["repositories"]) - {example} == {"charts/hangwatch", "hangwatch"}
    for name in ("hangwatch", "hangwatch-producer"):
        page = urllib.request.urlopen(f"{published.index.simple}{name}/").read().decode()
        assert f"{name.replace('-', '_')}-{VERSION}-py3-none-any.whl" in page
    sums = {
        name: digest
        for digest, name in (
            line.split("  ") for line in (published.dist / "SHA256SUMS").read_text().splitlines()
        )
    }
    for uploaded in published.index.packages.iterdir():
        assert release_script.sha256(uploaded) == sums[uploaded.name], uploaded.name
    pulled = helm_python.pull(
        f"oci://{host}/charts/hangwatch", version=VERSION, destination=tmp_path, plain_http=True
    )
    archive = tmp_path / f"hangwatch-{VERSION}.tgz"
    assert archive.is_file(), pulled
    assert release_script.sha256(archive) == sums[archive.name]
    values = {"webhook": {"certManager": {"enabled": True}}}  # no certificate made per render
    ours = helm_python.Chart.load(release_script.CHART)
    theirs = helm_python.Chart.load(archive)
    assert theirs.metadata == ours.metadata | {"version": VERSION, "appVersion": VERSION}
    assert theirs.render(values, name="hangwatch", namespace=NAMESPACE) == ours.render(
        values, name="hangwatch", namespace=NAMESPACE
    )


def test_the_producer_from_the_index_imports_on_python_3_9(published: Published) -> None:
    """`hangwatch-producer` of this version, from the index, installs on Debian
    bullseye's Python 3.9 (the producer's floor; tests/producer_package's cached root,
    whose environment holds its dependencies) and imports from where pip put it."""
    box = python39_root()
    with box.scratch() as (_, inside):
        done = box.run(
            f"pip install --quiet --no-deps --index-url {published.index.simple} "
            f"--target {inside}/site 'hangwatch-producer=={VERSION}' && "
            f"PYTHONPATH={inside}/site python -c 'import sys, hangwatch_producer as h; "
            f"from hangwatch_producer import producer; print(sys.version_info[:2], h.__version__, "
            f"h.__file__)'",
            env={"PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
    print(f"Python 3.9 from the index: {done.stdout.strip()}")
    assert done.stdout.startswith("(3, 9)") and f" {VERSION} " in done.stdout
    assert f"{inside}/site/hangwatch_producer/__init__.py" in done.stdout


def test_the_producer_from_the_index_installs_on_python_3_10(
    published: Published, tmp_path: Path
) -> None:
    """`hangwatch-producer` of this version installs from the index, with its dependencies
    (confluent-kafka and msgspec: PyPI's, through the index), into a fresh virtualenv of
    CPython 3.10, the python3 of Apache Spark's official images
    (`hangwatch_testing.pythons.python_3_10`), and its producer imports."""
    venv = tmp_path / "py310"
    subprocess.run([python_3_10(), "-m", "venv", str(venv)], check=True, timeout=120)
    env = _index_env(venv, published.index)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, f"hangwatch-producer=={VERSION}"], env=env, check=True, timeout=600)
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sys, confluent_kafka, hangwatch_producer as h; "
            "from hangwatch_producer import producer; "
            "print(sys.version_info[:2], h.__version__, confluent_kafka.version()[0], h.__file__)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    print(f"Python 3.10 from the index: {done.stdout.strip()}")
    assert done.stdout.startswith("(3, 10)") and f" {VERSION} " in done.stdout
    assert str(venv) in done.stdout  # imported from the virtualenv, not a checkout


def _readme_block(heading: str, registry: str) -> list[list[str]]:
    """The README's commands under `heading`, `$REGISTRY` being the test's registry (the
    block's own `REGISTRY=` line is the user's choice of registry, which this is)."""
    commands = block_commands(README, heading)
    return [
        [word.replace("$REGISTRY", registry) for word in command]
        for command in commands
        if not command[0].startswith("REGISTRY=")
    ]


def _index_env(venv: Path, index: PackageIndex) -> dict[str, str]:
    """A user's shell: the virtualenv first on PATH, pip pointed at the index; nothing of
    this test's environment that would reach the checkout (no PYTHONPATH, no HANGWATCH_*,
    no pip find-links)."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HANGWATCH_", "PYTHON", "PIP_", "KUBECONFIG", "VIRTUAL_ENV"))
    }
    return {
        **keep,
        "PATH": f"{venv / 'bin'}:{keep.get('PATH', '/usr/bin:/bin')}",
        "PIP_INDEX_URL": index.simple,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def _user_env(venv: Path, node: NodeCluster, index: PackageIndex) -> dict[str, str]:
    """`_index_env` with the admin's kubeconfig."""
    return _index_env(venv, index) | {"KUBECONFIG": str(node.admin_kubeconfig)}


def _kubectl(node: NodeCluster, words: list[str], env: dict[str, str]) -> str:
    """A README kubectl command with the release's kubectl, in the user's shell `env`
    (its KUBECONFIG the admin's)."""
    return _run([str(node.components.kube_bin / "kubectl"), *words[1:]], env=env, timeout=300)


def _cordon_as_hangwatch(node: NodeCluster) -> None:
    """The node's marks as the operator's cordon writes them (its own patch, read again
    and retried when the kubelet's status update beat it: 409, as the operator does)."""
    with admin_api(node) as api:
        core = client.CoreV1Api(api)
        for _ in range(10):
            body = node.get(f"/api/v1/nodes/{NODE_NAME}")
            patch, _ = cordon_patch(body, f"{JOBS}/{POLICY}", time.time())
            assert patch is not None
            try:
                core.patch_node(NODE_NAME, patch.marks, _content_type=MERGE)
                if patch.taint:
                    json_patch = "application/json-patch+json"
                    core.patch_node(NODE_NAME, patch.taint, _content_type=json_patch)
                return
            except client.ApiException as exc:
                if exc.status != 409:
                    raise
            time.sleep(0.2)
    pytest.fail("the node's cordon conflicted 10 times in a row")


def _leftovers(node: NodeCluster) -> list[str]:
    kubectl = [str(node.components.kube_bin / "kubectl"), f"--kubeconfig={node.admin_kubeconfig}"]

    def names(*args: str) -> list[str]:
        done = subprocess.run(
            [*kubectl, "get", *args, "-o", "name"], capture_output=True, text=True, check=True
        )
        return done.stdout.split()

    left = [n for n in names("crd") if n.endswith((".hangwatch.dev", ".kopf.dev"))] + [
        n for n in names("mutatingwebhookconfigurations") if "hangwatch" in n
    ]
    left += [n for n in names("clusterroles") + names("clusterrolebindings") if "hangwatch" in n]
    leases = subprocess.run(
        [*kubectl, "get", "leases", "--all-namespaces", "-o",
         "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{'\\n'}{end}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    node_lease = f"kube-node-lease/{NODE_NAME}"  # the kubelet's own (the node is hangwatch-node)
    left += [f"lease {n}" for n in leases if "hangwatch" in n and n != node_lease]
    left += [n for n in names("namespaces") if n == f"namespace/{NAMESPACE}"]
    body = node.get(f"/api/v1/nodes/{NODE_NAME}")
    if body["spec"].get("unschedulable"):
        left.append("the node is cordoned")
    left += [
        f"taint {t['key']}" for t in body["spec"].get("taints") or () if "hangwatch" in t["key"]
    ]
    marks = {**body["metadata"].get("labels", {}), **body["metadata"].get("annotations", {})}
    left += [f"node mark {k}" for k in marks if k.startswith("hangwatch.dev/")]
    return left


@dataclass
class Installed:
    """The README's install block carried out (`installed`): the chart from the registry,
    hangwatch from the index in a user's virtualenv, the operator run from it."""

    release: HelmRelease
    run: OperatorRun
    venv: Path
    env: dict[str, str]
    """The user's shell (`_user_env`)."""
    check: list[str]
    """The README's `hangwatch check` command."""
    stop_operator: Callable[[], None]
    """Stops the operator (the uninstall test: the policies are deleted while it runs,
    the rest once it is gone); the fixture's teardown stops it otherwise."""


@pytest.fixture(scope="module")
def installed(
    node: NodeCluster, published: Published, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    """The README's install block, read from README.md, as a user runs it: `helm install`
    of the published chart, `pip install` into a fresh virtualenv with pip pointed at the
    index; a policy in a namespace of jobs; the operator run from that virtualenv as the
    installed Deployment says. Shared by the module's last three tests, which need the
    install in this order: an executor pod and `hangwatch check`, the example's job, the
    README's uninstall (last: it takes everything away)."""
    registry = published.registry.host
    workdir = tmp_path_factory.mktemp("installed")
    venv = workdir / "user-venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    env = _user_env(venv, node, published.index)
    install = _readme_block(INSTALL, registry)
    assert [c[:2] for c in install] == [
        ["helm", "install"],
        ["pip", "install"],
        ["hangwatch", "check"],
    ]
    helm = parse_helm(install[0])
    assert helm.chart == f"oci://{registry}/charts/hangwatch"
    assert helm.version == VERSION
    release = HelmRelease(node, helm.chart, version=helm.version, plain_http=True)
    assert (helm.release, helm.namespace, helm.create_namespace) == (release.name, NAMESPACE, True)
    release.install(helm.values)
    print(f"helm install {helm.chart} --version {helm.version}: deployed")
    _run([str(venv / "bin" / install[1][0]), *install[1][1:]], env=env)
    shown = _run([str(venv / "bin/pip"), "show", "--files", "hangwatch"], env=env)
    assert f"Version: {VERSION}" in shown and str(venv) in shown, shown
    ensure_namespace(node, JOBS)
    broker = SilentBroker(node.node_ip)
    body = policy(POLICY, broker.address, namespace=JOBS)
    body["spec"]["processView"] = {"enabled": False}
    node.create(POLICIES, body)
    operator_python = str(venv / "bin" / "python")
    try:
        with ExitStack() as operator:
            run, _ = operator.enter_context(
                running_operator(node, workdir / "operator", python=operator_python)
            )
            wait_operator_ready(run, node, release, JOBS, POLICY)
            with admin_api(node) as api:  # no deployment controller: the status it writes
                ready = {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}
                client.AppsV1Api(api).patch_namespaced_deployment_status(
                    "hangwatch-operator",
                    NAMESPACE,
                    {"status": {**ready, "updatedReplicas": 2}},
                    _content_type=MERGE,
                )
            yield Installed(release, run, venv, env, install[2], operator.close)
    finally:
        broker.close()
        node.delete(f"/api/v1/namespaces/{JOBS}")
        if node.exists(f"/api/v1/namespaces/{SPARK_NAMESPACE}"):
            node.delete(f"/api/v1/namespaces/{SPARK_NAMESPACE}")


def test_installed_as_the_readme_says_and_checked(
    node: NodeCluster, published: Published, installed: Installed
) -> None:
    """An executor pod whose image and injected sidecar containerd pulls from the
    registry runs; the README's `hangwatch check`, from the index's wheel, passes."""
    registry = published.registry.host
    image = f"{registry}/hangwatch:{VERSION}"
    driver = submit_driver(node, "-published", namespace=JOBS)
    pod = executor_for(
        node, driver, 1, image, "import time; time.sleep(3600)",
        suffix="-published", namespace=JOBS,
    )  # fmt: skip
    pod["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    name = create_pod(node, pod, namespace=JOBS)["metadata"]["name"]
    try:
        wait_for(
            f"executor {name} Running (its images pulled from {registry})",
            lambda: read_pod(node, name, JOBS)["status"].get("phase") == "Running",
            timeout=300,
        )
        running = read_pod(node, name, JOBS)
        sidecars = [
            c for c in running["spec"]["initContainers"] if c["name"] == "hangwatch-sidecar"
        ]
        assert [c["image"] for c in sidecars] == [image]
        pulled = node.ctr("images", "ls", "-q").stdout.split()
        assert image in pulled, pulled
        check = installed.check
        deadline = time.monotonic() + 180
        while True:
            done = subprocess.run(
                [str(installed.venv / "bin" / check[0]), *check[1:]],
                capture_output=True, text=True, env=installed.env, timeout=180, check=False,
            )  # fmt: skip
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(3)
        print(f"$ hangwatch check (from the index's wheel):\n{done.stdout}{done.stderr}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
    finally:
        node.delete(f"/api/v1/namespaces/{JOBS}/pods/{name}", grace_seconds=0)


def test_the_examples_job_runs_in_its_image_from_the_registry(
    node: NodeCluster, installed: Installed, example_image: str, tmp_path: Path
) -> None:
    """`_the_example_job_runs`, under the installed operator."""
    _the_example_job_runs(node, installed.release, installed.run, example_image, tmp_path / "job")


def test_uninstalled_as_the_readme_says_leaves_nothing(
    node: NodeCluster, published: Published, installed: Installed
) -> None:
    """The README's uninstall block, with the node cordoned as hangwatch cordons it: the
    policies deleted while the operator runs (it lets them go), then the rest; nothing
    of hangwatch is left in the cluster or the virtualenv. Last of the module."""
    _cordon_as_hangwatch(node)
    uninstall = _readme_block(UNINSTALL, published.registry.host)
    policies_first, *rest = uninstall
    assert policies_first[:3] == ["kubectl", "delete", "producerhealthpolicies"]
    _kubectl(node, policies_first, installed.env)
    installed.stop_operator()
    for command in rest:
        if command[:2] == ["helm", "uninstall"]:
            uninstall_release = parse_uninstall(command)
            with helm_python.Config(
                kubeconfig_path=str(node.admin_kubeconfig), namespace=uninstall_release[1]
            ) as cfg:
                cfg.uninstall(uninstall_release[0], wait="watcher", timeout=120)
            print(f"helm uninstall {uninstall_release[0]}: done")
        elif command[:2] == ["pip", "uninstall"]:
            _run([str(installed.venv / "bin/pip"), *command[1:]], env=installed.env)
        else:
            assert command[0] == "kubectl", command
            _kubectl(node, command, installed.env)
    assert _leftovers(node) == []
    listed = subprocess.run(
        [str(installed.venv / "bin/pip"), "list", "--format", "json"],
        capture_output=True, text=True, env=installed.env, check=True,
    ).stdout  # fmt: skip
    assert not any(p["name"].startswith("hangwatch") for p in json.loads(listed))


def _the_example_job_runs(
    node: NodeCluster, release: HelmRelease, run: OperatorRun, image: str, workdir: Path
) -> None:
    """The example's spark-submit.sh submits orders_job.py in the example's image (pulled
    from the registry) on the stock-like base's Spark line, with that line's own
    spark-submit, against a real Kafka cluster on the node IP; the namespace as the
    example's README prepares it, a policy watching the executors. Judged: while both
    tasks write, each executor's injected sidecar reads its producer's telemetry and
    says healthy; the job ends cleanly (`ended_cleanly`), the driver reports every event
    acknowledged and `pipeline verify` reads each back; no executor was replaced, no
    container restarted, the operator took no action on them."""
    workdir.mkdir()
    started = time.monotonic()
    kafka = KafkaLab(brokers=1, topics={TOPIC: 4}, host=node.node_ip).start()
    try:
        prepare_namespace(node, kafka)
        wait_operator_ready(run, node, release, SPARK_NAMESPACE, POLICY_NAME)
        run_id = f"example-{uuid.uuid4().hex[:8]}"
        recorder = PodRecorder(node)
        pull = {"spark.kubernetes.container.image.pullPolicy": "IfNotPresent"}
        submission = Submission(
            node, image, kafka, run_id, workdir, job=EXAMPLE_JOB, conf=pull,
            line=STOCK_LINE, json_summary=False,
        )  # fmt: skip
        try:
            wait_for(
                "both executors' sidecars reading their producers' telemetry",
                lambda: writing_executors(recorder, release.sidecar_port),
                timeout=600,
            )

            said: dict[str, object] = {}

            def healthy() -> bool:
                now = {
                    pod["metadata"]["name"]: (sidecar_status(pod, release.sidecar_port) or {}).get(
                        "verdict"
                    )
                    for pod in recorder.role("executor")
                }
                if now != said:
                    print(f"the executors' sidecars say: {now}")
                    said.clear()
                    said.update(now)
                return set(now.values()) == {"healthy"}

            wait_for("both executors' sidecars saying healthy", healthy, timeout=120)
            submitted = submission.wait()
        finally:
            submission.stop()
            time.sleep(1)
            recorder.close()
        driver_log = ended_cleanly(node, recorder, submitted, STOCK_LINE)
        acknowledged = f"run {run_id}: {EXAMPLE_EVENTS} of {EXAMPLE_EVENTS} events acknowledged"
        assert acknowledged in driver_log, driver_log[-3000:]
        every_event_read_back(kafka, run_id, EXAMPLE_EVENTS)
        executors = recorder.role("executor")
        assert len(executors) == 2, [p["metadata"]["name"] for p in executors]
        restarted = [
            (pod["metadata"]["name"], status["name"], status["restartCount"])
            for pod in recorder.pods.values()
            for status in (
                *pod["status"].get("initContainerStatuses", ()),
                *pod["status"].get("containerStatuses", ()),
            )
            if status.get("restartCount")
        ]
        assert not restarted, restarted
        names = {pod["metadata"]["name"] for pod in executors}
        policy_path = f"/apis/hangwatch.dev/v1alpha1/namespaces/{SPARK_NAMESPACE}"
        status = node.get(f"{policy_path}/producerhealthpolicies/{POLICY_NAME}")["status"]
        taken = [a for a in status.get("recentActions") or () if a.get("pod") in names]
        assert not taken, taken
        python = ".".join(map(str, STOCK_PYTHON))
        print(
            f"the example's job on Spark {STOCK_LINE.version} (Python {python}), image from "
            f"the registry: {EXAMPLE_EVENTS} events, sidecars healthy, nothing restarted, "
            f"{time.monotonic() - started:.0f} s with Kafka's start"
        )
    finally:
        remove_pods(node)
        kafka.close()


def parse_uninstall(command: list[str]) -> tuple[str, str]:
    """`helm uninstall RELEASE --namespace NS [--wait]` -> (release, namespace)."""
    release, *rest = command[2:]
    namespace = "default"
    words = iter(rest)
    for word in words:
        if word in {"--namespace", "-n"}:
            namespace = next(words)
        else:
            assert word == "--wait", f"the test does not know helm uninstall's {word!r}"
    return release, namespace
