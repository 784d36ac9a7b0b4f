"""Record what the webhook answers for every case of `webhook_cases` into a JSON fixture.

Not a test module; run it as `python -m tests.operator.record_webhook_operations`.
It starts the operator with `webhook_server.serving_webhook`, sends one AdmissionReview
per case over HTTPS and writes, per case, the pod, the namespace, the JSON Patch
operations the webhook returned (`[]` without a patch) and its warnings. The
committed `webhook_operations.json` was recorded on the code before issue 15 (kopf's
admission machinery diffing the whole pod), so that the tests compare today's
answers with what the webhook did then.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from hangwatch_testing.spark_pods import admission_review
from tests.operator.webhook_cases import CASES, FIXTURE, case_pod
from tests.operator.webhook_server import patch_ops, serving_webhook


def main() -> int:
    recorded = {}
    with tempfile.TemporaryDirectory() as tmp, serving_webhook(Path(tmp)) as webhook:
        for name in CASES:
            pod, namespace = case_pod(name)
            response = webhook.answer(admission_review(pod, namespace))["response"]
            recorded[name] = {
                "namespace": namespace,
                "pod": pod,
                "operations": patch_ops(response),
                "warnings": response.get("warnings", []),
            }
            print(f"  {name}: {len(recorded[name]['operations'])} operations", file=sys.stderr)
    path = Path(__file__).with_name(FIXTURE)
    path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
