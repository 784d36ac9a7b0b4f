"""The lab's TLS material: a CA its clients trust, one they do not, the brokers' keystores.

With `KafkaSettings.tls` every broker serves clients on a TLS listener (`TLS_LISTENER`)
too. `make_material` writes, with openssl, into the cluster's data directory: the CA
the lab hands its clients (`ca.pem`: `KafkaProcesses.tls_ca`), another CA nobody is
given, one broker key, and a PKCS12 keystore per CA holding that key and a certificate
for `localhost` and 127.0.0.1 signed by it. The brokers read `broker.p12`, a copy of the
keystore the setting names (`trusted`: clients' handshakes succeed; `untrusted`: every
handshake fails, "a certificate the client does not trust"); `KafkaFaults.
fix_certificates` replaces it with the trusted one and restarts the brokers (the
certificate fixed). Every file goes with the data directory.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hangwatch.errors import LabSetupError

TLS_LISTENER = "SSL"
"""The TLS listener's name (and its security protocol)."""
TLS_MODES = ("", "trusted", "untrusted")
"""`KafkaSettings.tls`: no TLS listener, or one whose certificate clients trust, or not."""
KEYSTORE_PASSWORD = "hangwatch-lab"
"""The brokers' keystores' password (a lab's throwaway material)."""
DAYS = "2"
SUBJECT = "/CN=localhost"
NAMES = "subjectAltName=DNS:localhost,IP:127.0.0.1"
"""The broker certificate's names: a client's hostname check passes on 127.0.0.1."""


@dataclass(frozen=True)
class Material:
    """Where the lab's TLS files are."""

    dir: Path

    @property
    def ca(self) -> Path:
        """The CA certificate (PEM) the lab's clients trust."""
        return self.dir / "ca.pem"

    @property
    def keystore(self) -> Path:
        """The keystore the brokers read."""
        return self.dir / "broker.p12"

    def signed_by(self, ca: str) -> Path:
        """The keystore whose certificate CA `ca` (`trusted`, `untrusted`) signed."""
        return self.dir / f"broker-{ca}.p12"


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise LabSetupError(f"making the lab's TLS material: openssl {args[0]} failed: {last}")


def make_material(dir: Path, presented: str) -> Material:
    """The lab's CAs, broker key and keystores under `dir` (made), the brokers' keystore a
    copy of the one `presented` (`trusted` or `untrusted`) names."""
    if shutil.which("openssl") is None:
        raise LabSetupError("the lab's TLS listener needs openssl (apt-get install openssl)")
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "names.ext").write_text(NAMES + "\n")
    _openssl("genpkey", "-algorithm", "RSA", "-out", "broker.key", cwd=dir)
    _openssl("req", "-new", "-key", "broker.key", "-subj", SUBJECT, "-out", "broker.csr", cwd=dir)
    for ca in ("trusted", "untrusted"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", DAYS,
                 "-subj", f"/CN=hangwatch lab {ca} CA", "-keyout", f"{ca}.key",
                 "-out", f"{ca}.pem", cwd=dir)  # fmt: skip
        _openssl("x509", "-req", "-in", "broker.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                 "-set_serial", "1", "-days", DAYS, "-extfile", "names.ext",
                 "-out", f"broker-{ca}.pem", cwd=dir)  # fmt: skip
        _openssl("pkcs12", "-export", "-inkey", "broker.key", "-in", f"broker-{ca}.pem",
                 "-certfile", f"{ca}.pem", "-name", "broker", "-passout",
                 f"pass:{KEYSTORE_PASSWORD}", "-out", f"broker-{ca}.p12", cwd=dir)  # fmt: skip
    material = Material(dir)
    shutil.copyfile(dir / "trusted.pem", material.ca)
    shutil.copyfile(material.signed_by(presented), material.keystore)
    return material


def listener_properties(material: Material) -> dict[str, str]:
    """The broker properties of the TLS listener's keystore."""
    prefix = f"listener.name.{TLS_LISTENER.lower()}.ssl"
    return {
        f"{prefix}.keystore.type": "PKCS12",
        f"{prefix}.keystore.location": str(material.keystore),
        f"{prefix}.keystore.password": KEYSTORE_PASSWORD,
        f"{prefix}.key.password": KEYSTORE_PASSWORD,
    }
