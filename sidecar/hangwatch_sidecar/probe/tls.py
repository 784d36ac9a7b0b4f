"""TLS for the raw per-broker probe, configured from the same ssl.* properties librdkafka reads.

Fed by `endpoints.probe_cluster` (and the benchmark) with the probe's `ProbeSettings`; the
`SSLContext` it returns wraps each probe socket when security.protocol is SSL or
SASL_SSL. A property that cannot be loaded (missing CA file, wrong key password) is a
`ProbeConfigError` naming the property, with secret values scrubbed.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from hangwatch_sidecar.probe.settings import ProbeConfigError, ProbeSettings

_ERRORS = (OSError, ssl.SSLError, ValueError)


def _flag(settings: ProbeSettings, key: str, default: bool) -> bool:
    value = settings.client_config.get(key)
    return default if value is None else value.strip().lower() in {"true", "1", "yes", "on"}


def _invalid(settings: ProbeSettings, what: str, exc: Exception) -> ProbeConfigError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return ProbeConfigError(f"cannot use {what} for TLS: {settings.scrub(reason)}")


def tls_context(settings: ProbeSettings) -> ssl.SSLContext | None:
    """An SSLContext mirroring librdkafka's ssl.* properties, or None for plaintext.

    Understands ssl.ca.location (file or directory), ssl.ca.pem, ssl.certificate.location,
    ssl.key.location, ssl.key.password, ssl.certificate.pem, ssl.key.pem,
    enable.ssl.certificate.verification and ssl.endpoint.identification.algorithm.
    """
    if not settings.uses_tls:
        return None
    conf = settings.client_config
    ca = conf.get("ssl.ca.location")
    ca = None if ca in (None, "", "probe") else ca
    try:
        context = ssl.create_default_context(
            cafile=ca if ca and not os.path.isdir(ca) else None,
            capath=ca if ca and os.path.isdir(ca) else None,
            cadata=conf.get("ssl.ca.pem") or None,
        )
    except _ERRORS as exc:
        what = "ssl.ca.pem" if conf.get("ssl.ca.pem") else "ssl.ca.location"
        raise _invalid(settings, what, exc) from None
    verify = _flag(settings, "enable.ssl.certificate.verification", True)
    identify = conf.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
    context.check_hostname = verify and identify
    if not verify:
        context.verify_mode = ssl.CERT_NONE
    try:
        _load_client_certificate(context, settings)
    except _ERRORS as exc:
        what = "the client certificate (ssl.certificate.*, ssl.key.*)"
        raise _invalid(settings, what, exc) from None
    return context


def _load_client_certificate(context: ssl.SSLContext, settings: ProbeSettings) -> None:
    conf = settings.client_config
    password = conf.get("ssl.key.password") or None
    if conf.get("ssl.certificate.location"):
        context.load_cert_chain(
            conf["ssl.certificate.location"], conf.get("ssl.key.location") or None, password
        )
    elif conf.get("ssl.certificate.pem"):
        with tempfile.TemporaryDirectory(prefix="hangwatch-tls-") as tmp:  # 0700, removed at once
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            for path, text in ((cert, conf["ssl.certificate.pem"]), (key, conf.get("ssl.key.pem"))):
                if text:
                    with open(path, "w", encoding="ascii") as out:
                        out.write(text)
            context.load_cert_chain(cert, key if conf.get("ssl.key.pem") else None, password)
