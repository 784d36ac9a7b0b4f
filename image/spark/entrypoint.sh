#!/bin/bash
# Starts what Spark's Kubernetes backend asks of a pod of image/spark/Dockerfile, as
# Apache Spark's own image (kubernetes/dockerfiles/spark/entrypoint.sh) does:
#   driver ARGS...  spark-submit in client mode inside the driver pod, bound to the pod IP;
#   executor        KubernetesExecutorBackend with the SPARK_* variables the driver set;
#   anything else   run as a command.
# SPARK_DRIVER_HOST_IS_POD_IP=true (a spark.kubernetes.driverEnv setting) makes the
# driver advertise its pod IP to executors instead of its headless Service's DNS name:
# for clusters without cluster DNS (the node tier has none).
set -euo pipefail
SPARK_CLASSPATH="${SPARK_CLASSPATH:-}:${SPARK_HOME}/jars/*"
case "${1:-}" in
  driver)
    shift
    host=()
    if [ "${SPARK_DRIVER_HOST_IS_POD_IP:-}" = true ]; then
      host=(--conf "spark.driver.host=$SPARK_DRIVER_BIND_ADDRESS")
    fi
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      "${host[@]}" --deploy-mode client "$@"
    ;;
  executor)
    shift
    # the executor's JVM options, one SPARK_JAVA_OPT_<n> variable each, in order
    mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$SPARK_CLASSPATH:${SPARK_DIST_CLASSPATH:-}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  *)
    exec "$@"
    ;;
esac
