#!/usr/bin/env bash
# Pushes the OCI archives `make images` wrote to a registry with skopeo, each under two tags:
#   <registry>/flotilla-<image>:<version>             what the Helm chart's image.tag defaults to
#   <registry>/flotilla-<image>:<version>-<revision>  the commit it was built from (12 hex digits)
# The version and revision are read back from the archive's labels, so the tags name what is in
# the image, not what the work tree holds now. An image built from a dirty tree is refused
# unless --allow-dirty is given (its revision label ends in -dirty).
#
# Usage: scripts/push-images.sh [--build-dir DIR] [--allow-dirty] REGISTRY [-- SKOPEO_COPY_FLAGS...]
#   e.g. scripts/push-images.sh registry.example.com/ml
#        scripts/push-images.sh localhost:5000/flotilla -- --dest-tls-verify=false
# Credentials: skopeo's own (`skopeo login REGISTRY`, or REGISTRY_AUTH_FILE).
set -euo pipefail

build_dir="build" allow_dirty=0 registry="" extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --allow-dirty) allow_dirty=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "push-images: unknown flag $1" >&2; exit 2 ;;
    *) registry="${1%/}"; shift ;;
  esac
done
if [ -z "$registry" ]; then
  echo "usage: $0 [--build-dir DIR] [--allow-dirty] REGISTRY [-- SKOPEO_COPY_FLAGS...]" >&2
  exit 2
fi
# shellcheck source=/dev/null
source "$build_dir/images/inputs.env"

for name in flotilla-operator flotilla-worker; do
  archive="$build_dir/images/$name-$FLOTILLA_VERSION.tar"
  if [ ! -f "$archive" ]; then
    echo "push-images: $archive is missing: run make images first" >&2
    exit 1
  fi
  label() { skopeo inspect --format "{{ index .Labels \"org.opencontainers.image.$1\" }}" "oci-archive:$archive"; }
  version="$(label version)" revision="$(label revision)"
  if [[ "$revision" == *-dirty ]] && [ "$allow_dirty" -eq 0 ]; then
    echo "push-images: $archive was built from uncommitted changes ($revision): commit and rebuild, or pass --allow-dirty" >&2
    exit 1
  fi
  short="${revision:0:12}"
  if [[ "$revision" == *-dirty ]]; then short="$short-dirty"; fi
  for tag in "$version" "$version-$short"; do
    echo "push-images: $archive -> docker://$registry/$name:$tag"
    skopeo copy "${extra[@]}" "oci-archive:$archive" "docker://$registry/$name:$tag"
  done
done
