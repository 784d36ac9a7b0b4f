"""Spark on Kubernetes end to end on the node tier: `spark-submit --master k8s://...`.

The package's fixtures (conftest.py: the line images, the Kafka cluster, the namespace
and the operator) are set up once for its three test modules: the job running with
sidecars, a wedged executor replaced, every broker unreachable.
"""
