"""Spark on Kubernetes end to end on the node tier: `spark-submit --master k8s://...`.

The package's fixtures (conftest.py: the default line's Spark image, the Kafka cluster,
the namespace and the operator) are set up once for its two test modules, each a whole
job on the default line: a wedged executor replaced, every broker unreachable. (The 3.5
line's job on Kubernetes is the example's own image, tests/node/test_install_from_registries.py,
which shares `submission.py`.)
"""
