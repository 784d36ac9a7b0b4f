"""`make publish`'s inputs: REGISTRY, INDEX and the credentials, as a careless user gives them.

Covers scripts/release.py: any REGISTRY text is a registry (host, port, path: where the
image and the chart go) or one line refusing it with exit 3, never a traceback
(hypothesis); INDEX must be an http(s) URL; the registry's credentials come as a pair
from the environment and only ever reach a mode-0600 file that is gone afterwards, never
a command line; publish refuses a dist/ whose files differ from its SHA256SUMS.
"""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch_testing import scripts

release = scripts.load("release")


@pytest.mark.parametrize(
    ("text", "image", "charts"),
    [
        ("ghcr.io/hangwatch", "ghcr.io/hangwatch/hangwatch", "oci://ghcr.io/hangwatch/charts"),
        ("127.0.0.1:5000", "127.0.0.1:5000/hangwatch", "oci://127.0.0.1:5000/charts"),
        (
            "oci://registry.example.com/platform/",
            "registry.example.com/platform/hangwatch",
            "oci://registry.example.com/platform/charts",
        ),
        ("[::1]:5000/a/b", "[::1]:5000/a/b/hangwatch", "oci://[::1]:5000/a/b/charts"),
    ],
)
def test_a_registry_names_where_the_image_and_the_chart_go(
    text: str, image: str, charts: str
) -> None:
    registry = release.Registry.parse(text)
    assert (registry.image, registry.charts) == (image, charts)


@pytest.mark.parametrize(
    "text", ["", "https://ghcr.io/x", "ghcr.io/Upper", "host:99999999", "a b", "ghcr.io//x"]
)
def test_a_bad_registry_is_one_line(text: str) -> None:
    with pytest.raises(release.ReleaseError) as raised:
        release.Registry.parse(text)
    assert raised.value.code == 3
    assert "REGISTRY=" in str(raised.value)


@given(st.text(max_size=80))
def test_any_registry_text_is_a_registry_or_one_line(text: str) -> None:
    try:
        registry = release.Registry.parse(text)
    except release.ReleaseError as exc:
        assert exc.code == 3
        assert "\n" not in str(exc).replace(repr(text), "")
    else:
        assert registry.image.endswith("/hangwatch")
        assert not any(c.isspace() for c in registry.image)


@given(st.text(max_size=80))
def test_any_index_text_is_a_url_or_one_line(text: str) -> None:
    try:
        url = release.index_url(text)
    except release.ReleaseError as exc:
        assert exc.code == 3
    else:
        assert url.startswith(("http://", "https://"))
        assert not any(c.isspace() for c in url)


def test_credentials_go_to_a_private_file_that_is_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REGISTRY_USERNAME", "robot")
    monkeypatch.setenv("REGISTRY_PASSWORD", "s3cret:with:colons")
    credentials = release.registry_credentials()
    with release.auth_file("127.0.0.1:5000", credentials) as path:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        auth = json.loads(path.read_text())["auths"]["127.0.0.1:5000"]["auth"]
        assert base64.b64decode(auth).decode() == "robot:s3cret:with:colons"
    assert not path.exists()
    assert not path.parent.exists()


def test_a_lone_username_or_password_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_USERNAME", "robot")
    monkeypatch.delenv("REGISTRY_PASSWORD", raising=False)
    with pytest.raises(release.ReleaseError, match="both"):
        release.registry_credentials()
    monkeypatch.delenv("REGISTRY_USERNAME")
    assert release.registry_credentials() is None


def test_publish_refuses_files_that_differ_from_their_sums(tmp_path: Path) -> None:
    with pytest.raises(release.ReleaseError, match="make release"):
        release.check_sums(tmp_path)
    (tmp_path / "a.whl").write_bytes(b"one")
    release.write_sums(tmp_path, ["a.whl"])
    assert release.check_sums(tmp_path) == ["a.whl"]
    (tmp_path / "a.whl").write_bytes(b"two")
    with pytest.raises(release.ReleaseError, match="differs"):
        release.check_sums(tmp_path)


def test_an_image_archive_that_is_not_one_is_refused_in_one_line(tmp_path: Path) -> None:
    """`make release IMAGE_ARCHIVE=...` with a file that is no image archive."""
    import tarfile

    text = tmp_path / "notes.txt"
    text.write_text("not a tar")
    other = tmp_path / "other.tar"
    with tarfile.open(other, "w") as tar:
        tar.add(text, arcname="notes.txt")
    for archive, said in ((text, "not an image archive"), (other, "neither a docker nor")):
        with pytest.raises(release.ReleaseError, match=said) as raised:
            release.copy_image(archive, tmp_path / "out.oci.tar", "x:1")
        assert raised.value.code == 3
    assert not (tmp_path / "out.oci.tar").exists()
