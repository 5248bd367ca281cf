#!/usr/bin/env bash
# Installs the servers the tests run against into .tools/bin, pinned, and
# reuses them when the pinned versions are already there. Needs only Go.
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
