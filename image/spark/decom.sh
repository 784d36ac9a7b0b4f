#!/bin/bash
# The executor container's preStop hook when spark.decommission.enabled is set (Spark's
# Kubernetes backend names /opt/decom.sh, as Apache Spark's own image provides it): ask
# the executor JVM (started by entrypoint.sh; found by its main class, since a pod that
# shares its process namespace has another PID 1) to decommission with SIGPWR, then
# wait (at most 60 s) for it to exit, so the pod's grace period covers the migration.
set -u
pid=$(pgrep -f org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend | head -n 1)
[ -n "$pid" ] || { echo "decom.sh: no executor process"; exit 0; }
echo "decom.sh: asked to decommission; signalling the executor (pid $pid) with SIGPWR"
kill -s PWR "$pid" || exit 0
for _ in $(seq 600); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
echo "decom.sh: done"
