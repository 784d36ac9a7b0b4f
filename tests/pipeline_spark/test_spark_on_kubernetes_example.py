"""The Spark-on-Kubernetes example is consistent, and hangwatch watches its executors.

Covered (examples/spark-on-kubernetes/ against examples/policy-spark-executors.yaml):
- every YAML file parses; the SparkApplication has the shape spark-operator's v1beta2
  CRD requires (string-valued sparkConf, labels and annotations);
- spark-submit.sh passes exactly the Spark properties, application file and arguments
  that spark-operator derives from the SparkApplication;
- every Spark property named is one Spark knows (Spark's own config registry, in the
  JVM): a typo such as `spark.decomission.enabled` fails here, not silently in a cluster;
- the executor pod *Spark itself* builds from those properties (Spark's
  KubernetesExecutorBuilder, called through py4j) is covered by the example policy
  (`parse_policy` + `matching_policy`); the driver pod and an executor without the team
  label are not; it carries the decommission preStop hook the operator's decommission
  action needs, HANGWATCH_TELEMETRY_DIR at the path the webhook mounts, the Kafka
  credentials as secretKeyRef variables, and after the webhook's patch it is a valid
  Pod (kubernetes-validate, strict);
- the job's arguments pass the pipeline's own option checks and name the brokers the
  policy's sidecar probes and a topic it watches;
- rbac.yaml validates against the Kubernetes schema.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from py4j.java_gateway import JavaGateway
from pyspark.java_gateway import launch_gateway

from hangwatch_operator.injection import (
    INJECT_ANNOTATION,
    apply_add_ops,
    build_sidecar_patch,
    is_opted_out,
)
from hangwatch_operator.policies import matching_policy, parse_policy
from hangwatch_operator.settings import InjectionMode, OperatorSettings
from hangwatch_operator.watched import watched_pod
from hangwatch_pipeline.run_options import add_run_arguments, run_options

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "spark-on-kubernetes"
PREFIXED = (
    "spark.executorEnv.",
    "spark.kubernetes.driver.label.",
    "spark.kubernetes.executor.label.",
    "spark.kubernetes.executor.annotation.",
    "spark.kubernetes.executor.secretKeyRef.",
    "spark.kubernetes.executor.secrets.",
)
"""Property families Spark reads by prefix (no registry entry per key)."""
OPERATOR_LABELS = (
    "sparkoperator.k8s.io/app-name",
    "sparkoperator.k8s.io/launched-by-spark-operator",
)


def load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def spark_application() -> dict[str, Any]:
    (app,) = load(EXAMPLE / "sparkapplication.yaml")
    return app


def operator_conf(app: dict[str, Any]) -> dict[str, str]:
    """The Spark properties spark-operator (v2, `submission.go`) derives from the spec."""
    spec, meta = app["spec"], app["metadata"]
    driver, executor = spec["driver"], spec["executor"]
    conf = {
        "spark.app.name": meta["name"],
        "spark.kubernetes.namespace": meta["namespace"],
        "spark.kubernetes.container.image": spec["image"],
        "spark.kubernetes.container.image.pullPolicy": spec["imagePullPolicy"],
        "spark.kubernetes.authenticate.driver.serviceAccountName": driver["serviceAccount"],
        "spark.driver.cores": str(driver["cores"]),
        "spark.driver.memory": driver["memory"],
        "spark.executor.instances": str(executor["instances"]),
        "spark.executor.cores": str(executor["cores"]),
        "spark.executor.memory": executor["memory"],
    }
    for role, pod in (("driver", driver), ("executor", executor)):
        for key, value in (pod.get("labels") or {}).items():
            conf[f"spark.kubernetes.{role}.label.{key}"] = value
        for key, value in (pod.get("annotations") or {}).items():
            conf[f"spark.kubernetes.{role}.annotation.{key}"] = value
    conf.update(spec["sparkConf"])
    return conf


def spark_submit_command() -> tuple[dict[str, str], str, str, list[str]]:
    """(--conf properties, --name, application file, its arguments) of spark-submit.sh,
    as the script runs it: with a `spark-submit` on PATH that prints its arguments."""
    with tempfile.TemporaryDirectory(prefix="hangwatch-submit-") as tmp:
        fake = Path(tmp) / "spark-submit"
        printer = "import json, sys; print(json.dumps(sys.argv[1:]))"
        fake.write_text(f"#!/bin/sh\nexec python3 -c '{printer}' \"$@\"\n")
        fake.chmod(0o755)
        done = subprocess.run(
            ["bash", str(EXAMPLE / "spark-submit.sh")],
            env={**os.environ, "PATH": f"{tmp}:{os.environ['PATH']}"},
            capture_output=True,
            text=True,
            check=True,
        )
    words: list[str] = json.loads(done.stdout)[2:]  # after --master k8s://...
    conf: dict[str, str] = {}
    name = ""
    while words[0].startswith("--"):
        option, value = words.pop(0), words.pop(0)
        if option == "--conf":
            key, _, setting = value.partition("=")
            conf[key] = setting
        elif option == "--name":
            name = value
    app_file = words.pop(0)
    return conf, name, app_file, words


@pytest.fixture(scope="module")
def gateway() -> Iterator[JavaGateway]:
    """A Spark JVM (no SparkContext) for Spark's own pod builder; ended afterwards."""
    gw = launch_gateway()  # type: ignore[no-untyped-call]
    try:
        yield gw
    finally:
        proc = gw.proc
        gw.shutdown()
        proc.stdin.close()
        proc.wait(30)


def scala_object(gw: JavaGateway, name: str) -> Any:
    return gw.jvm.java.lang.Class.forName(f"{name}$").getField("MODULE$").get(None)


def java_conf(gw: JavaGateway, conf: dict[str, str]) -> Any:
    jconf = gw.jvm.org.apache.spark.SparkConf(False)
    # What the driver adds at run time before it asks for executors.
    runtime = {
        "spark.master": "k8s://https://kubernetes.default.svc",
        "spark.driver.host": "orders-enricher-driver-svc.spark-jobs.svc",
        "spark.driver.port": "7078",
    }
    for key, value in {**conf, **runtime}.items():
        jconf.set(key, value)
    return jconf


def executor_pod(gw: JavaGateway, conf: dict[str, str]) -> dict[str, Any]:
    """The executor pod Spark's KubernetesExecutorBuilder makes from `conf` (executor 1)."""
    jvm = gw.jvm
    jconf = java_conf(gw, conf)
    executor_conf = scala_object(
        gw, "org.apache.spark.deploy.k8s.KubernetesConf"
    ).createExecutorConf(jconf, "1", "spark-5b1f0c2ad83e4f06", jvm.scala.Option.empty(), 0)
    secret_entry = scala_object(
        gw, "org.apache.spark.internal.config.package"
    ).AUTH_SECRET_FILE_EXECUTOR()
    security = jvm.org.apache.spark.SecurityManager(jconf, jvm.scala.Option.empty(), secret_entry)
    profile = scala_object(
        gw, "org.apache.spark.resource.ResourceProfile"
    ).getOrCreateDefaultProfile(jconf)
    builder = jvm.org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBuilder()
    spark_pod = builder.buildFromFeatures(executor_conf, security, None, profile).pod()
    serialize = jvm.io.fabric8.kubernetes.client.utils.Serialization.asJson
    pod: dict[str, Any] = json.loads(serialize(spark_pod.pod()))
    pod["metadata"]["namespace"] = executor_conf.namespace()
    pod["spec"]["containers"] = [json.loads(serialize(spark_pod.container()))]
    return pod


def driver_labels(gw: JavaGateway, conf: dict[str, str]) -> dict[str, str]:
    """The labels Spark puts on the driver pod."""
    jvm = gw.jvm
    resource = jvm.org.apache.spark.deploy.k8s.submit.PythonMainAppResource("local:///job.py")
    driver_conf = scala_object(gw, "org.apache.spark.deploy.k8s.KubernetesConf").createDriverConf(
        java_conf(gw, conf), "spark-5b1f0c2ad83e4f06", resource,
        "org.apache.spark.deploy.PythonRunner", gw.new_array(jvm.java.lang.String, 0),
        jvm.scala.Option.empty(),
    )  # fmt: skip
    labels = jvm.scala.jdk.javaapi.CollectionConverters.asJava(driver_conf.labels())
    keys = labels.keySet().toArray()  # indexed, not iterated: pyspark patches py4j's errors
    return {str(keys[i]): str(labels.get(keys[i])) for i in range(len(keys))}


def test_yaml_parses_and_has_the_crd_shape() -> None:
    for path in sorted(EXAMPLE.glob("*.yaml")):
        assert load(path), f"{path.name} holds no document"
    app = spark_application()
    assert (app["apiVersion"], app["kind"]) == ("sparkoperator.k8s.io/v1beta2", "SparkApplication")
    spec = app["spec"]
    assert (spec["type"], spec["mode"]) == ("Python", "cluster")
    assert spec["mainApplicationFile"] == "local:///opt/hangwatch/job.py"
    assert all(isinstance(a, str) for a in spec["arguments"])
    for mapping in (
        spec["sparkConf"],
        spec["driver"]["labels"],
        spec["executor"]["labels"],
        spec["executor"]["annotations"],
    ):
        assert all(isinstance(v, str) for v in mapping.values()), mapping  # map[string]string


def test_spark_submit_is_equivalent_to_the_spark_application() -> None:
    app = spark_application()
    conf, name, app_file, arguments = spark_submit_command()
    assert {**conf, "spark.app.name": name} == operator_conf(app)
    assert app_file == app["spec"]["mainApplicationFile"]
    assert arguments == app["spec"]["arguments"]


def test_every_spark_property_is_known_to_spark(gateway: JavaGateway) -> None:
    scala_object(gateway, "org.apache.spark.internal.config.package")
    scala_object(gateway, "org.apache.spark.deploy.k8s.Config")
    registry = scala_object(gateway, "org.apache.spark.internal.config.ConfigEntry")
    unknown = [
        key
        for key in operator_conf(spark_application())
        if not key.startswith(PREFIXED) and key != "spark.app.name"
        and registry.findEntry(key) is None
    ]  # fmt: skip
    assert not unknown
    assert registry.findEntry("spark.decomission.enabled") is None  # the check can fail


def test_spark_built_executor_pods_are_watched(gateway: JavaGateway) -> None:
    conf = operator_conf(spark_application())
    policy = parse_policy(load(EXAMPLES / "policy-spark-executors.yaml")[0])
    pod = executor_pod(gateway, conf)
    labels = pod["metadata"]["labels"]
    for key in OPERATOR_LABELS:  # what spark-operator adds on top must not get in the way
        labels[key] = "orders-enricher" if key.endswith("app-name") else "true"
    assert matching_policy(pod, [policy]) == policy
    assert not is_opted_out(pod) and pod["metadata"]["annotations"][INJECT_ANNOTATION] == "true"
    assert watched_pod(pod, 9477).decommission_hook

    container = pod["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["HANGWATCH_TELEMETRY_DIR"]["value"] == OperatorSettings().telemetry_dir
    refs = {
        n: e["valueFrom"]["secretKeyRef"]
        for n, e in env.items()
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs["KAFKA_SASL_PASSWORD"] == {"name": "kafka-client", "key": "password"}
    assert "value" not in env["KAFKA_SASL_PASSWORD"]

    patch = build_sidecar_patch(pod, policy, OperatorSettings(), InjectionMode.NATIVE)
    assert patch
    apply_add_ops(pod, patch)
    kubernetes_validate.validate(pod, "1.29", strict=True)

    unlabelled = {k: v for k, v in conf.items() if k != "spark.kubernetes.executor.label.team"}
    assert matching_policy(executor_pod(gateway, unlabelled), [policy]) is None
    labels = driver_labels(gateway, conf)
    assert labels["spark-role"] == "driver" and labels["team"] == "payments"
    assert (
        matching_policy({"metadata": {"namespace": "spark-jobs", "labels": labels}}, [policy])
        is None
    )


def test_job_arguments_pass_the_pipeline_checks_and_match_the_policy() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser, with_master=False)
    options = run_options(parser.parse_args(spark_application()["spec"]["arguments"]), {})
    policy = load(EXAMPLES / "policy-spark-executors.yaml")[0]["spec"]["kafka"]
    assert options.bootstrap.split(",") == policy["bootstrapServers"]
    assert options.topic in policy["topics"]
    assert options.producer_conf["security.protocol"] == policy["security"]["protocol"]
    assert options.producer_conf["sasl.mechanism"] == policy["security"]["saslMechanism"]
    assert options.producer_conf["sasl.password"] == "${KAFKA_SASL_PASSWORD}"  # resolved in tasks


def test_rbac_is_valid_kubernetes() -> None:
    docs = load(EXAMPLE / "rbac.yaml")
    assert [d["kind"] for d in docs] == ["ServiceAccount", "Role", "RoleBinding"]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.29", strict=True)
