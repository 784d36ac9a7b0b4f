"""Builds, ahead of the tests, the roots and images the image, node and producer tiers start from.

Each is cached by content outside the repository and built by the function its tier's
fixtures call, so a tier finds it ready (nothing built inside a test) and builds it
itself only when setup did not:

- `base`: the bookworm root filesystem with Debian's python3
  (`hangwatch_testing.containers.bookworm_python_rootfs`), the image tier's, the node
  tier's and the Spark images' base; debootstrap, minutes cold;
- `spark-images`: the default Spark line's image (scripts/build-spark-image.sh on that
  base, the line's pyspark and Kafka connector: run it after setup resolved the
  connectors' jars), the node tier's spark-submit tests' (`spark_image`);
- `spark-stock`: the stock-like Apache Spark image the example's image is built on
  (`hangwatch_testing.stock_spark`: the bullseye root below, Java 17, the 3.5 line's
  distribution from its virtualenv), the node tier's install from registries';
- `hangwatch-image`: `make image` on that base as a docker archive
  (`hangwatch_testing.containers.hangwatch_image_archive`), the image and node tiers';
- `python39`: Debian bullseye's Python 3.9 with the producer's environment
  (`hangwatch_testing.bullseye.python39_root`), the producer-package tier's.

    python -m hangwatch_testing.prebuilt base|spark-images|spark-stock|hangwatch-image|python39

scripts/setup.sh --kube (`make test`) runs them in the background beside the
Kubernetes build. A failed build is one line naming it, exit 1.
"""

from __future__ import annotations

import sys

import pytest

from hangwatch_pipeline.spark_kafka import DEFAULT_LINE
from hangwatch_testing.bullseye import python39_root
from hangwatch_testing.containers import (
    ROOT,
    bookworm_python_rootfs,
    hangwatch_image_archive,
    require_tools,
    run,
)
from hangwatch_testing.stock_spark import stock_spark_archive

SPARK_IMAGE_TIMEOUT_SECONDS = 3600.0


def spark_images() -> None:
    """The default Spark line's image on the bookworm base (a no-op when built from
    these sources). The other line (3.5) runs on Kubernetes in the example's image, on
    the stock-like base (`spark-stock`)."""
    require_tools()
    base = bookworm_python_rootfs()
    script = str(ROOT / "scripts" / "build-spark-image.sh")
    run(
        ["bash", script, str(base), "--line", DEFAULT_LINE.name],
        timeout=SPARK_IMAGE_TIMEOUT_SECONDS,
    )


BUILDS = {
    "base": bookworm_python_rootfs,
    "spark-images": spark_images,
    "spark-stock": stock_spark_archive,
    "hangwatch-image": hangwatch_image_archive,
    "python39": python39_root,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in BUILDS:
        print(f"usage: python -m hangwatch_testing.prebuilt {'|'.join(BUILDS)}", file=sys.stderr)
        return 3
    try:
        BUILDS[args[0]]()
    except pytest.fail.Exception as exc:  # the fixtures' helpers fail the way tests do
        print(f"prebuilt: building {args[0]} failed: {exc.msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
