"""Runs in the demo's Spark executors: the reference pipeline's task, wedgeable for S4.

`write_partition` is `hangwatch_pipeline.job.write_partition` with one addition: the
client's (librdkafka's) log lines go to a Python logger whose handler blocks forever
once a file named `wedge` exists in the executor's working directory. confluent-kafka
runs a `logger` on the producer's poll thread, so creating that file in one
executor's directory blocks that executor's I/O thread — the structure of seed S4
(there, user code in a delivery callback made a blocking call). The wrapper runs the
job's own callbacks on a separate thread, so a logger is the one way left for user
code to block the I/O thread. Other executors, and the replacement executor (a new
working directory), are not affected.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hangwatch_demo.workload import WedgeOnFile
from hangwatch_pipeline import job

CLIENT_LOGGER = "hangwatch_demo.client"
WEDGE_FILE = "wedge"


def _client_logger() -> str:
    """The wedgeable client logger of this Python worker (set up once per process)."""
    logger = logging.getLogger(CLIENT_LOGGER)
    if not any(isinstance(h, WedgeOnFile) for h in logger.handlers):
        logger.propagate = False  # the client's debug lines are a trigger, not output
        logger.setLevel(logging.DEBUG)
        logger.addHandler(WedgeOnFile(Path.cwd() / WEDGE_FILE))
    return CLIENT_LOGGER


def write_partition(
    plan: job.TaskPlan, accumulators: job.JobAccumulators, events: Iterable[dict[str, Any]]
) -> None:
    """The pipeline's task, its client logging through the wedgeable logger."""
    plan = dataclasses.replace(plan, client_logger=_client_logger())
    job.write_partition(plan, accumulators, events)
