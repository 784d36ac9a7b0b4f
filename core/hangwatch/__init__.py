"""hangwatch: detect and remediate silently hung Kafka producers in Spark-on-Kubernetes jobs.

This core package holds what every component shares: the public contracts
(verdicts, reachability classes, metric prefix), the error vocabulary, structured
logging and the `hangwatch` command-line dispatcher. It never imports kopf or the
Kubernetes client, so the sidecar and the PySpark side can depend on it.
"""

__version__ = "0.1.0"
