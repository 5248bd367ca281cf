#!/usr/bin/env bash
# Installs the servers the tests run against into .tools/bin, pinned, and
# reuses them when the pinned versions are already there (needs only Go);
# and, where apt-get is there, Debian's packages of pandas and torch (for
# the Python client's DataFrame and dataset tests, with the system python3) and of Prometheus (for
# promtool, which tests the alert rules).
set -euo pipefail
cd "$(dirname "$0")/.."

MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
FAKE_GCS_VERSION=v1.56.1

bin="$PWD/.tools/bin"
mkdir -p "$bin"

install() { # name module version
  local name=$1 module=$2 version=$3 stamp="$bin/.$1.version"
  if [ -x "$bin/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    return
  fi
  echo "installing $name $version into .tools/bin (once; a few minutes cold)" >&2
  GOBIN="$bin" GOFLAGS=-buildvcs=false go install "$module@$version"
  echo "$version" >"$stamp"
}

install minio github.com/minio/minio "$MINIO_VERSION" &
p1=$!
install fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION" &
p2=$!
wait $p1
wait $p2

if ! /usr/bin/python3 -c "import pandas, torch" 2>/dev/null && command -v apt-get >/dev/null; then
  echo "installing Debian's python3-pandas and python3-torch for the Python client's tests (once; a few minutes)" >&2
  apt-get install -y -q python3-pandas python3-torch >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q python3-pandas python3-torch >/dev/null 2>&1; } ||
    echo "python3-pandas or python3-torch could not be installed: the DataFrame and dataset tests fail under CI=true" >&2
fi

if ! command -v promtool >/dev/null && command -v apt-get >/dev/null; then
  echo "installing Debian's prometheus for promtool (once; about 20 s)" >&2
  apt-get install -y -q prometheus >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q prometheus >/dev/null 2>&1; } ||
    echo "prometheus (promtool) could not be installed: the alert rules' tests fail under CI=true" >&2
fi
