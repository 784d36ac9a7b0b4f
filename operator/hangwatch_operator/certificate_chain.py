"""Whether a webhook's serving certificate verifies against its caBundle, and why not.

The verdict is cryptography's own path validation (`cryptography.x509.verification`:
chain building, signatures, validity of every certificate of the path, the DNS name)
with the extension checks the API server's verifier makes (Go's crypto/x509): a CA
must say it is one (basicConstraints), the leaf must carry its DNS names in
subjectAltName and, when it has an extendedKeyUsage, allow server authentication. The
web PKI's stricter profile (an authority key identifier on every leaf, key usages on
every CA) is left out: the API server does not ask for it, and the chart's own
certificates do not carry it. When the certificate does not verify, `verify_chain`
names what a reader can act on: a certificate out of its validity, the names the leaf
has, an issuer that is not a CA of the bundle. Pure: no I/O.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    Policy,
    PolicyBuilder,
    Store,
    VerificationError,
)

SERVER_USAGES = frozenset(
    {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE}
)
"""An extendedKeyUsage the API server accepts for a webhook (Go: ExtKeyUsageServerAuth,
or any)."""


def _for_servers(
    policy: Policy, cert: x509.Certificate, usage: x509.ExtendedKeyUsage | None
) -> None:
    """The leaf's extendedKeyUsage, when present, allows server authentication."""
    if usage is not None and not SERVER_USAGES & set(usage):
        raise ValueError("its extendedKeyUsage does not allow server authentication")


_OURS = "Python extension validator failed: ValueError: "
"""How cryptography quotes a refusal of `_for_servers` (its own words follow)."""

CA_EXTENSIONS = ExtensionPolicy.permit_all().require_present(
    x509.BasicConstraints, Criticality.AGNOSTIC, None
)
LEAF_EXTENSIONS = (
    ExtensionPolicy.permit_all()
    .require_present(x509.SubjectAlternativeName, Criticality.AGNOSTIC, None)
    .may_be_present(x509.ExtendedKeyUsage, Criticality.AGNOSTIC, _for_servers)
)


def _verified(
    leaf: x509.Certificate,
    intermediates: list[x509.Certificate],
    cas: list[x509.Certificate],
    hostname: str,
    at: datetime.datetime,
) -> str:
    """cryptography's refusal of the path from `leaf` to a CA of `cas` for `hostname` at
    `at` (its reason, without the certificate it names); empty when it verifies."""
    verifier = (
        PolicyBuilder()
        .store(Store(cas))
        .time(at)
        .extension_policies(ca_policy=CA_EXTENSIONS, ee_policy=LEAF_EXTENSIONS)
        .build_server_verifier(x509.DNSName(hostname))
    )
    try:
        verifier.verify(leaf, intermediates)
    except VerificationError as exc:
        reason = str(exc).split(" (encountered processing", 1)[0]
        return reason.removeprefix("validation failed: ").replace(_OURS, "")
    return ""


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """Whether `issuer`'s key signed `cert` (the signature alone: the path is the
    verifier's)."""
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def dns_names(cert: x509.Certificate) -> list[str]:
    """The DNS names of the certificate's subjectAltName (none without one)."""
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return names.get_values_for_type(x509.DNSName)


def _out_of_validity(certs: Iterable[x509.Certificate], at: datetime.datetime) -> list[str]:
    """Each certificate not valid at `at`, with its validity."""
    return [
        f"{cert.subject.rfc4514_string()} valid {cert.not_valid_before_utc:%Y-%m-%d}"
        f"..{cert.not_valid_after_utc:%Y-%m-%d}"
        for cert in certs
        if not cert.not_valid_before_utc <= at <= cert.not_valid_after_utc
    ]


def verify_chain(
    leaf: x509.Certificate,
    intermediates: Iterable[x509.Certificate],
    cas: Iterable[x509.Certificate],
    hostname: str,
    now: datetime.datetime,
) -> str:
    """Why `leaf` (with `intermediates`) would not verify against `cas` for `hostname`
    at `now`; empty when it would. Named, each that applies: a certificate of the chain
    outside its validity at `now`, the leaf's DNS names when `hostname` is not one, and
    the issuer when it is no CA of `cas` (or the verifier's reason for refusing the path
    to one) where the chain is valid and for a name the leaf has; else an expired CA of
    `cas`, or the verifier's own reason."""
    chain, bundle = list(intermediates), list(cas)
    if not bundle:
        return "the caBundle holds no CA"
    refused = _verified(leaf, chain, bundle, hostname, now)
    if not refused:
        return ""
    problems = _out_of_validity((leaf, *chain), now)
    names = dns_names(leaf)
    if hostname not in names:
        problems.append(f"the certificate names {names or 'no DNS name'}, not {hostname}")
    if names:  # the path alone: where every certificate of the chain is valid, a leaf's name
        valid_from = max(cert.not_valid_before_utc for cert in (leaf, *chain))
        unanchored = _verified(leaf, chain, bundle, names[0], valid_from)
        if unanchored:
            held = ", ".join(c.subject.rfc4514_string() for c in bundle) or "nothing"
            top = (chain or [leaf])[-1]
            if not any(_signed_by(top, ca) for ca in bundle):
                problems.append(
                    f"issued by {top.issuer.rfc4514_string()}, not by a CA of the caBundle ({held})"
                )
            else:
                problems.append(f"the chain to the caBundle ({held}) is refused: {unanchored}")
    if not problems:
        problems = _out_of_validity(bundle, now) or [refused]
    return "; ".join(problems)
