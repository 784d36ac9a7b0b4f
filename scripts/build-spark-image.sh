#!/usr/bin/env bash
# Builds the Spark image of the node tier (image/spark/Dockerfile: Debian's Java 17, the
# project's pinned pyspark, hangwatch with the reference pipeline) with buildah on the
# debootstrap root filesystem BASE_TARBALL (tests/image/containers.py makes and caches
# it), and saves it as a docker archive that containerd imports. No registry.
#   scripts/build-spark-image.sh BASE_TARBALL          build if missing; prints
#                                                      SPARK_IMAGE=... and SPARK_ARCHIVE=...
#   scripts/build-spark-image.sh BASE_TARBALL --paths  print them, build nothing
# Cached in ~/.cache/hangwatch/spark-image/<key>/ where key hashes the Dockerfile, the
# entrypoint, the base, the pyspark pin and the hangwatch sources: rebuilt only when one
# of them changed. Exit 3 when a tool or the base is missing; 1 when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "build-spark-image: $*" >&2; }
fail() { step "$1 failed: $2"; exit "${3:-1}"; }
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 BASE_TARBALL [--paths]" >&2; exit 3; }
base_tarball=$1 mode=${2:-build}
[ -s "$base_tarball" ] || fail "reading the base" "no root filesystem tarball at $base_tarball (tests/image/containers.py bookworm_python_rootfs makes it)" 3
command -v buildah >/dev/null 2>&1 || fail "finding buildah" "install it (apt-get install buildah; scripts/setup.sh does)" 3

# Spark's Kafka connector (spark-sql-kafka-0-10 and the three jars it needs), resolved
# from Maven Central by the pipeline's pom into its cache (once), goes into Spark's own
# jars directory: jobs in the image use df.write.format("kafka") with no --jars.
connector_jars=$(PYTHONPATH=pipeline:core python3 -m hangwatch_pipeline.spark_kafka --print) \
  || fail "resolving Spark's Kafka connector" "the line above names what is missing" 3
# The demo's wedgeable producer interceptor (hangwatch_demo.interceptor, compiled once
# against the connector's kafka-clients): the node tier's restart test of Spark's sink
# names it in the job's kafka.interceptor.classes. Its source is among the hashed ones.
interceptor_jar=$(PYTHONPATH=demo:pipeline:core python3 -m hangwatch_demo.interceptor) \
  || fail "building the demo's Kafka interceptor" "the line above names what is missing" 3
pyspark_version=$(python3 -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb")); print(next(r.split("==")[1] for r in d["project"]["optional-dependencies"]["spark"] if r.startswith("pyspark==")))')
sources=$(git ls-files -co --exclude-standard -- pyproject.toml README.md producer core lab sidecar pipeline operator demo image/spark \
  | grep -v -e '__pycache__' -e '^.*\.pyc$' | sort)
key=$( { echo "base $(basename "$base_tarball") pyspark $pyspark_version"; \
  for j in $connector_jars; do echo "jar $(basename "$j")"; done; \
  for f in $sources; do [ -f "$f" ] && sha256sum "$f"; done; } | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/spark-image
image=localhost/hangwatch-spark:$key
archive=$cache/$key/spark.tar
if [ "$mode" = --paths ] || [ -s "$archive" ]; then
  echo "SPARK_IMAGE=$image"
  echo "SPARK_ARCHIVE=$archive"
  exit 0
fi

started=$(date +%s)
mkdir -p "$cache/dist"
sdist=$cache/dist/pyspark-$pyspark_version.tar.gz
if [ ! -s "$sdist" ]; then
  step "downloading pyspark $pyspark_version (about 450 MB, once)"
  python3 -m pip download --quiet --no-deps --no-binary :all: "pyspark==$pyspark_version" -d "$cache/dist" >&2 \
    || fail "downloading pyspark $pyspark_version" "check that PyPI is reachable (pip download pyspark==$pyspark_version)"
fi

work=$(mktemp -d /tmp/hangwatch-spark-image-XXXXXX)
container=""
cleanup() {
  [ -z "$container" ] || buildah rm "$container" >/dev/null 2>&1 || true
  buildah rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$work/context/spark-dist" "$work/context/spark-jars" "$work/tmp"
for j in $connector_jars $interceptor_jar; do cp "$j" "$work/context/spark-jars/"; done
cat > "$work/storage.conf" <<CONF
[storage]
driver = "vfs"
graphroot = "$work/graph"
runroot = "$work/run"
CONF
cat > "$work/containers.conf" <<CONF
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$work/tmp"
CONF
export CONTAINERS_STORAGE_CONF=$work/storage.conf CONTAINERS_CONF=$work/containers.conf BUILDAH_ISOLATION=chroot TMPDIR=$work/tmp
for f in $sources; do [ -f "$f" ] && install -D -m 0644 "$f" "$work/context/$f"; done
ln "$sdist" "$work/context/spark-dist/" 2>/dev/null || cp "$sdist" "$work/context/spark-dist/"

step "importing the base $(basename "$base_tarball")"
container=$(buildah from scratch) || fail "buildah from scratch" "see the message above"
buildah add --quiet "$container" "$base_tarball" / >/dev/null || fail "importing the base" "buildah add"
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$container"
buildah commit --quiet "$container" localhost/hangwatch-spark-base:$key >/dev/null || fail "importing the base" "buildah commit"
buildah rm "$container" >/dev/null; container=""

step "building $image (Java 17 from Debian, pyspark $pyspark_version, hangwatch)"
args=(--file image/spark/Dockerfile --tag "$image" --build-arg "BASE_IMAGE=localhost/hangwatch-spark-base:$key")
[ -z "${PIP_INDEX_URL:-}" ] || args+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL")
cert=${IMAGE_PIP_CERT:-${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}}
[ -z "$cert" ] || [ ! -s "$cert" ] || args+=(--secret "id=pip-cert,src=$cert")
cp image/spark/Dockerfile "$work/context/Dockerfile.spark"
buildah bud --layers=false "${args[@]/image\/spark\/Dockerfile/$work/context/Dockerfile.spark}" "$work/context" >&2 \
  || fail "building the Spark image" "the buildah output above names the step"

step "saving $archive"
mkdir -p "$cache/$key"
buildah push --quiet "$image" "docker-archive:$archive.partial:$image" >&2 || fail "saving the image" "buildah push"
mv "$archive.partial" "$archive"
# older builds (other keys) are of no use any more: keep the cache to one image
for old in "$cache"/*/spark.tar; do
  [ "$old" = "$archive" ] || rm -rf "$(dirname "$old")"
done
step "built in $(( $(date +%s) - started )) s"
echo "SPARK_IMAGE=$image"
echo "SPARK_ARCHIVE=$archive"
