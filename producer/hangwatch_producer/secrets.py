"""Redaction of secrets in client configuration before it is logged, served or written.

librdkafka and the Java client name secrets in a few recognisable ways (`*.password`,
`sasl.jaas.config`, `*.key.pem`, OAuth client secrets). Anything matching is replaced
by a fixed marker; the key stays so a reader can see that it was set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "[redacted]"

_SECRET_KEY = re.compile(
    r"(password|secret|jaas\.config|\.key\.pem|key\.pem|private\.key|token|credential"
    r"|sasl\.oauthbearer\.config|ssl\.key\.location|keystore\.location|\.keytab)",
    re.IGNORECASE,
)


def is_secret_key(key: str) -> bool:
    """True when a configuration key names a secret (its value must never be shown)."""
    return bool(_SECRET_KEY.search(key))


def redact(config: Mapping[str, object]) -> dict[str, object]:
    """A copy of `config` with every secret value replaced by `REDACTED`."""
    return {k: (REDACTED if is_secret_key(k) else v) for k, v in config.items()}
