"""The injection webhook answered by kopf's admission machinery: the reference path.

A kopf handler module (`kopf run -m hangwatch_operator.webhook -m
hangwatch_testing.kopf_admission_path`) that registers `webhook.inject_sidecar` a
second time, under the id `inject-sidecar-via-kopf`. `AdmissionServer` answers only
the injection webhook's own path, so requests to this one go through kopf as every
request did before issue 15: the synchronous handler in a worker thread, then the
whole pod diffed into a JSON Patch. The operator benchmark measures both paths in
one run; `test_webhook_https` checks that both give the same answers.
"""

from __future__ import annotations

from hangwatch_operator.webhook import inject_sidecar, register_injection_webhook

VIA_KOPF_ID = "inject-sidecar-via-kopf"

register_injection_webhook(VIA_KOPF_ID, inject_sidecar)
