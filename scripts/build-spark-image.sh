#!/usr/bin/env bash
# Builds the Spark image of the node tier (image/spark/Dockerfile: Debian's Java 17, the
# pinned pyspark of one Spark line, hangwatch with the reference pipeline) with buildah on
# the debootstrap root filesystem BASE_TARBALL (hangwatch_testing.containers makes and
# caches it), and saves it as a docker archive that containerd imports. No registry.
#   scripts/build-spark-image.sh BASE_TARBALL [--line L]          build if missing; prints
#                                                      SPARK_IMAGE=... and SPARK_ARCHIVE=...
#   scripts/build-spark-image.sh BASE_TARBALL [--line L] --paths  print them, build nothing
# --line names a line of hangwatch_pipeline.spark_kafka.LINES (4.x, 3.5; default the
# default line, 4.x): its pyspark pin (its pyproject.toml extra) and its Kafka connector's
# jars go into the image; the demo's interceptor jar only into the default line's (the
# node tier's fault tests use it; it is compiled against that line's kafka-clients).
# Cached in ~/.cache/hangwatch/spark-image/<key>/ where key hashes the Dockerfile, the
# entrypoint, the base, the pyspark pin, the connector's jars and the hangwatch sources:
# rebuilt only when one of them changed; one image kept per line. Exit 3 when a tool or
# the base is missing or the line unknown; 1 when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "build-spark-image: $*" >&2; }
fail() { step "$1 failed: $2"; exit "${3:-1}"; }
usage() { echo "usage: $0 BASE_TARBALL [--line L] [--paths]" >&2; exit 3; }
[ $# -ge 1 ] || usage
base_tarball=$1 mode=build line=""
shift
while [ $# -gt 0 ]; do
  case $1 in
    --paths) mode=--paths; shift ;;
    --line) [ $# -ge 2 ] || usage; line=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -s "$base_tarball" ] || fail "reading the base" "no root filesystem tarball at $base_tarball (hangwatch_testing.containers bookworm_python_rootfs makes it)" 3
command -v buildah >/dev/null 2>&1 || fail "finding buildah" "install it (apt-get install buildah; scripts/setup.sh does)" 3

# Spark's Kafka connector (spark-sql-kafka-0-10 and the three jars it needs), resolved
# from Maven Central by the pipeline's pom into its cache (once), goes into Spark's own
# jars directory: jobs in the image use df.write.format("kafka") with no --jars.
# The line: its name (the default one's when not given), pyspark version and extra, from
# spark_kafka.LINES (an unknown name is its one-line error, exit 3).
# The project's Python (scripts/setup.sh's virtualenv, HANGWATCH_VENV): hangwatch and its
# dependencies are installed there; a fresh machine's python3 has none of them.
py=${HANGWATCH_VENV:-.venv}/bin/python
[ -x "$py" ] || fail "finding the project's Python" "no $py: run scripts/setup.sh" 3
read -r line pyspark_version spark_extra default_line < <("$py" -c '
import sys
from hangwatch.errors import UsageError
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE, line_named
try:
    line = line_named(sys.argv[1]) if sys.argv[1] else DEFAULT_LINE
except UsageError as exc:
    sys.exit(f"build-spark-image: {exc}")
print(line.name, line.version, line.extra, DEFAULT_LINE.name)
' "$line") && [ -n "${default_line:-}" ] || exit 3
connector_jars=$("$py" -m hangwatch_pipeline.spark_kafka --line "$line" --print) \
  || fail "resolving Spark's Kafka connector" "the line above names what is missing" 3
# The demo's wedgeable producer interceptor (hangwatch_demo.interceptor, compiled once
# against the connector's kafka-clients): the node tier's restart test of Spark's sink
# names it in the job's kafka.interceptor.classes. Its source is among the hashed ones.
interceptor_jar=""
if [ "$line" = "$default_line" ]; then
  interceptor_jar=$("$py" -m hangwatch_demo.interceptor) \
    || fail "building the demo's Kafka interceptor" "the line above names what is missing" 3
fi
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
  step "downloading pyspark $pyspark_version (300 to 450 MB, once per version)"
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

step "building $image (Spark $line: Java 17 from Debian, pyspark $pyspark_version, hangwatch)"
args=(--file image/spark/Dockerfile --tag "$image" --build-arg "BASE_IMAGE=localhost/hangwatch-spark-base:$key" --build-arg "SPARK_EXTRA=$spark_extra")
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
echo "$line" > "$cache/$key/line"
# older builds of this line (other keys) are of no use any more: one image per line (a
# build without a line file is of the default line)
for old in "$cache"/*/spark.tar; do
  old_line=$(cat "$(dirname "$old")/line" 2>/dev/null || echo "$default_line")
  [ "$old" = "$archive" ] || [ "$old_line" != "$line" ] || rm -rf "$(dirname "$old")"
done
step "built in $(( $(date +%s) - started )) s"
echo "SPARK_IMAGE=$image"
echo "SPARK_ARCHIVE=$archive"
