"""TLS material for the admission webhook when the chart mounts none: a CA and a server cert.

Used by `webhook` for local runs (no `webhook_cert_file` setting) and by tests that
need a webhook served over verified HTTPS. In a cluster the chart mounts a certificate
from a Secret instead. kopf can self-sign too, but through `certbuilder`/`oscrypto`,
whose OpenSSL version detection fails on OpenSSL 3.0.10 and later; `cryptography`
works everywhere. The server certificate is signed by a separate CA so that clients
verify a chain, as the API server does with the configuration's `caBundle`.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY_DAYS = 365
"""Long enough for a local run or a test session, short enough to not linger as trust."""


@dataclass(frozen=True)
class WebhookCertificates:
    """PEM-encoded CA certificate, server certificate and server private key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        """Write `ca.crt`, `tls.crt`, `tls.key` (the Secret's key names); return their paths."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = (directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
        for path, data in zip(paths, (self.ca_pem, self.cert_pem, self.key_pem), strict=True):
            path.write_bytes(data)
        paths[2].chmod(0o600)
        return paths


def generate_webhook_certificates(hostnames: list[str]) -> WebhookCertificates:
    """A fresh CA and a server certificate for `hostnames` (DNS names or IP addresses)."""
    if not hostnames:
        raise ValueError("at least one hostname is needed for the server certificate")
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hangwatch webhook CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])])
    cert = (
        _builder(subject, ca_name, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_sans(hostnames)), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return WebhookCertificates(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALIDITY_DAYS))
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _sans(hostnames: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hostnames):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names
