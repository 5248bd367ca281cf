#!/usr/bin/env bash
# Copies the inputs the fuzz targets found interesting (kept by Go in its
# build cache) into each package's testdata/fuzz/<target>/, where every
# `go test` runs them as seeds and every fuzz run starts from them. Run it
# after a longer fuzzing session (e.g. FUZZTIME=10m scripts/test.sh), then
# commit what it added.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="$(go env GOCACHE)/fuzz/$(go list -m)"
added=0
for dir in "$cache"/*/Fuzz* "$cache"/*/*/Fuzz*; do
  [ -d "$dir" ] || continue
  target=$(basename "$dir")
  pkg=${dir#"$cache"/}
  pkg=${pkg%/"$target"}
  dest="$pkg/testdata/fuzz/$target"
  mkdir -p "$dest"
  for f in "$dir"/*; do
    if [ ! -e "$dest/$(basename "$f")" ]; then
      cp "$f" "$dest/"
      added=$((added + 1))
    fi
  done
done
echo "added $added inputs under */testdata/fuzz/"
