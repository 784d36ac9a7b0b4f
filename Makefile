# The two Quickstart commands are `make demo` and `make test`; each installs what it needs.
# Everything runs in the project's own virtual environment, made by scripts/setup.sh
# (HANGWATCH_VENV): the machine's Python and its site-packages are left alone.
VENV ?= .venv
PY ?= $(VENV)/bin/python
export HANGWATCH_VENV := $(VENV)

.PHONY: setup demo test test-fast check pytest bench image kube kube-floor docs docs-references release publish

# The image `make image` builds and the chart's default image (image.repository and
# sidecar.image.repository, tag = the chart's appVersion): tests/chart checks they agree.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
IMAGE_REPOSITORY ?= ghcr.io/hangwatch/hangwatch
IMAGE ?= $(IMAGE_REPOSITORY):$(VERSION)
# Empty: the Dockerfile's default base (Debian bookworm, Python 3.11 slim).
BASE_IMAGE ?=

setup:
	bash scripts/setup.sh

# The demo's report (HTML, one timeline PNG per scenario, the run's record) goes here;
# the demo prints its path last.
DEMO_REPORT ?= demo-report

demo: setup
	$(PY) -m hangwatch demo --report "$(DEMO_REPORT)"

# Static checks first (seconds), then the test suite against the real lab. Every tool runs
# through $(PY), so a virtualenv's install of hangwatch is the one checked.
check:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy core/hangwatch lab/hangwatch_lab sidecar/hangwatch_sidecar pipeline/hangwatch_pipeline operator/hangwatch_operator demo/hangwatch_demo testing/hangwatch_testing scripts benchmarks
# The producer distribution (producer/, Python 3.9+) with its own settings: ruff above
# reads producer/pyproject.toml (target py39); mypy 2.x targets 3.10 at the oldest, so
# mypy at 3.9 (mypy 1.19.1) runs in the Python 3.9 test (tests/producer_package).
	$(PY) -m mypy --config-file producer/pyproject.toml --python-version 3.10 producer/hangwatch_producer producer/tests
	$(PY) -c 'from importlinter.cli import lint_imports_command; lint_imports_command()'
# The release workflow (.github/workflows/) by actionlint, shellcheck on its scripts
# (scripts/go-tool.sh builds actionlint once, about a minute, into ~/.cache/hangwatch/tools).
	@actionlint=$$(bash scripts/go-tool.sh actionlint) && $$actionlint -no-color -pyflakes= .github/workflows/*.yml

# Test groups run in parallel on PYTEST_WORKERS processes (most tests wait on sockets,
# processes and timeouts, not on the CPU); tests/conftest.py says what a group is and
# which go first. The run ends with each worker's and the longest groups' time.
PYTEST_WORKERS ?= 4
# The floor release of tests/kube (tests/kube/test_floor.py, the oldest Kubernetes minor
# the chart admits): `make test` builds it (scripts/setup.sh --kube; about 10 minutes cold
# on 2 cores, nothing once cached) and runs it; KUBE_FLOOR=0 leaves both out.
KUBE_FLOOR ?= 1
export HANGWATCH_KUBE_FLOOR := $(KUBE_FLOOR)

pytest:
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25 \
		$(if $(filter 0,$(KUBE_FLOOR)),--ignore=tests/kube/test_floor.py)

# The unit tier only (tests/conftest.py TIERS): nothing but Python, a couple of minutes.
test-fast: setup
	$(PY) -m pytest -m unit -n 2 -q

# Like setup, plus the Kubernetes of tests/kube and tests/node (built once, then cached).
# Each phase ends with a `make test: PHASE took ...` line (scripts/timed.sh), which
# scripts/time_table.py reads, with the run's JUnit XML, into docs/testing-tiers.md.
test:
	@bash scripts/timed.sh --machine
	bash scripts/timed.sh setup bash scripts/setup.sh --kube
	bash scripts/timed.sh check $(MAKE) --no-print-directory check
	bash scripts/timed.sh pytest $(MAKE) --no-print-directory pytest

# Every artifact of this version into $(DIST) (emptied first): both distributions' wheels
# and sdists, the chart package, the image as an OCI archive (built by `make image` on
# BASE_IMAGE), the Java client's telemetry jar, CycloneDX SBOMs of the wheels and the
# image, SHA256SUMS (scripts/release.py says how each is made). The version is
# pyproject.toml's; the release refuses to build when a copy of it disagrees.
# IMAGE_ARCHIVE: the image built already (a docker or OCI archive of `make image`), copied
# instead of building it again.
DIST ?= dist
IMAGE_ARCHIVE ?=
release:
	$(PY) scripts/release.py build --dist "$(DIST)" --base-image "$(BASE_IMAGE)" \
		$(if $(IMAGE_ARCHIVE),--image-archive "$(IMAGE_ARCHIVE)")

# $(DIST) to a registry and a package index of yours: the image to $(REGISTRY)/hangwatch,
# the chart to oci://$(REGISTRY)/charts/hangwatch, the wheels and sdists to $(INDEX).
# Credentials from the environment only: REGISTRY_USERNAME/REGISTRY_PASSWORD,
# TWINE_USERNAME/TWINE_PASSWORD. PLAIN_HTTP=1 for a registry without TLS.
REGISTRY ?=
INDEX ?=
PLAIN_HTTP ?= 0
publish:
	@test -n "$(REGISTRY)" -a -n "$(INDEX)" || { echo "make publish: set REGISTRY=host[:port][/path] and INDEX=<upload URL>" >&2; exit 3; }
	$(PY) scripts/release.py publish --dist "$(DIST)" --registry "$(REGISTRY)" --index "$(INDEX)" \
		$(if $(filter 1,$(PLAIN_HTTP)),--plain-http)

# Build the hangwatch image with docker, podman or buildah (whichever is present).
image:
	bash scripts/build-image.sh "$(IMAGE)" "$(VERSION)" "$(BASE_IMAGE)"

# The Kubernetes of tests/kube and tests/node (Kubernetes, etcd, containerd from the Go
# module proxy; built once, cached by version in ~/.cache/hangwatch/kube).
kube:
	bash scripts/build-kube.sh

# The floor release of tests/kube (tests/kube/test_floor.py): the oldest Kubernetes minor
# the chart's kubeVersion admits, its control plane only (kube-apiserver,
# kube-controller-manager, kubectl) from the Go module proxy; built once, cached by version.
kube-floor:
	bash scripts/build-kube.sh --floor

bench:
	bash scripts/setup.sh --kube
	for b in benchmarks/*.py; do $(PY) $$b || exit 1; done

# The documentation site (mkdocs.yml over docs/) into site/, strictly: a broken link fails
# (tests/docs builds it the same way in `make test`). `mkdocs serve` previews it.
docs:
	$(PY) -m mkdocs build --strict --site-dir site

# Regenerate docs/reference/ (chart values by helm-docs, the CRD reference) after editing
# charts/hangwatch/values.yaml or crds/producerhealthpolicy.yaml.
docs-references:
	$(PY) scripts/generate_references.py
