#!/usr/bin/env bash
# The application of sparkapplication.yaml, submitted with plain spark-submit (no
# spark-operator). Every --conf here is what the operator derives from the
# SparkApplication; tests/pipeline_spark/test_spark_on_kubernetes_example.py checks the
# two stay equivalent and that the executor pods Spark builds from these settings are
# matched by examples/policy-spark-executors.yaml.
#
#   K8S_API=https://api.example.com:6443 ./spark-submit.sh [SPARK-SUBMIT OPTIONS] [-- JOB ARGUMENTS]
#
# Options given here are added after the ones below (a later --conf of the same property
# wins: e.g. --conf spark.executor.instances=2); job arguments after `--` replace the
# job's arguments below (another Kafka cluster, another rate). The node tier
# (tests/node/test_spark_submit/) runs this very script that way against its cluster.
set -euo pipefail
K8S_API="${K8S_API:-https://kubernetes.default.svc}"
options=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  options+=("$1")
  shift
done
[ $# -eq 0 ] || shift
if [ $# -eq 0 ]; then
  set -- \
    --bootstrap kafka-0.kafka.orders.svc:9093,kafka-1.kafka.orders.svc:9093,kafka-2.kafka.orders.svc:9093 \
    --topic orders.enriched \
    --rate 20k/s \
    --duration 10m \
    -X security.protocol=SASL_SSL \
    -X sasl.mechanism=SCRAM-SHA-512 \
    -X 'sasl.username=${KAFKA_SASL_USERNAME}' \
    -X 'sasl.password=${KAFKA_SASL_PASSWORD}' \
    -X ssl.ca.location=/etc/kafka-client/ca.pem
fi

exec spark-submit \
  --master "k8s://${K8S_API}" \
  --deploy-mode cluster \
  --name orders-enricher \
  --conf spark.kubernetes.namespace=spark-jobs \
  --conf spark.kubernetes.container.image=registry.example.com/data/orders-enricher:1.0.0 \
  --conf spark.kubernetes.container.image.pullPolicy=IfNotPresent \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=spark-orders \
  --conf spark.driver.cores=1 \
  --conf spark.driver.memory=1g \
  --conf spark.executor.instances=4 \
  --conf spark.executor.cores=2 \
  --conf spark.executor.memory=4g \
  --conf spark.kubernetes.driver.label.team=payments \
  --conf spark.kubernetes.executor.label.team=payments \
  --conf spark.kubernetes.executor.annotation.hangwatch.dev/inject=true \
  --conf spark.task.maxFailures=8 \
  --conf spark.decommission.enabled=true \
  --conf spark.storage.decommission.enabled=true \
  --conf spark.storage.decommission.rddBlocks.enabled=true \
  --conf spark.storage.decommission.shuffleBlocks.enabled=true \
  --conf spark.executor.decommission.forceKillTimeout=120s \
  --conf spark.kubernetes.executor.terminationGracePeriodSeconds=150 \
  --conf spark.speculation=false \
  --conf spark.executorEnv.HANGWATCH_TELEMETRY_DIR=/var/run/hangwatch/telemetry \
  --conf spark.executorEnv.HANGWATCH_LOG_LEVEL=INFO \
  --conf spark.kubernetes.executor.secretKeyRef.KAFKA_SASL_USERNAME=kafka-client:username \
  --conf spark.kubernetes.executor.secretKeyRef.KAFKA_SASL_PASSWORD=kafka-client:password \
  --conf spark.kubernetes.executor.secrets.kafka-client=/etc/kafka-client \
  "${options[@]}" \
  local:///opt/hangwatch/job.py "$@"
