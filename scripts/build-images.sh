#!/usr/bin/env bash
# make images: builds the flotilla-operator and flotilla-worker images from a CMake build, with
# no container registry and no running container, as OCI archives:
#   <out>/flotilla-operator-<version>.tar   ref ghcr.io/flotilla-dev/flotilla-operator:<version>
#   <out>/flotilla-worker-<version>.tar     ref ghcr.io/flotilla-dev/flotilla-worker:<version>
# For each image: images/stage-rootfs.sh assembles the root filesystem, then buildah (or podman)
# builds images/<image>/Containerfile over it (FROM scratch, COPY, config: nothing is RUN) in a
# private vfs store under <out>, pushes it to the archive and deletes the store. The same
# Containerfile over the same staged folder is what a user with a registry builds (docs/images.md).
#
# Usage: scripts/build-images.sh [--build-dir DIR] [--out DIR] [--repository-prefix P] [IMAGE...]
#   DIR: a configured and built CMake build (default build); IMAGE: operator, worker (default both);
#   --out: default DIR/images; --repository-prefix: default ghcr.io/flotilla-dev.
# Labels: version = the CMake project version (also the tag), revision = `git rev-parse HEAD`
# (with -dirty when tracked files differ from it). Layers and the config carry the time of that
# commit (SOURCE_DATE_EPOCH if set), so the same commit and build give the same image digest.
# Needs: buildah or podman, run as root (their rootless mode needs user namespaces).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="build" out="" prefix="ghcr.io/flotilla-dev" images=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --repository-prefix) prefix="$2"; shift 2 ;;
    operator | worker) images+=("$1"); shift ;;
    *) echo "usage: $0 [--build-dir DIR] [--out DIR] [--repository-prefix P] [operator] [worker]" >&2; exit 2 ;;
  esac
done
[ ${#images[@]} -gt 0 ] || images=(operator worker)
out="${out:-$build_dir/images}"

if command -v buildah >/dev/null 2>&1; then builder=buildah
elif command -v podman >/dev/null 2>&1; then builder=podman
else
  echo "build-images: neither buildah nor podman is installed: run scripts/install-deps.sh" >&2
  exit 1
fi
inputs="$build_dir/images/inputs.env"
if [ ! -f "$inputs" ]; then
  echo "build-images: $inputs is missing: configure the build first (make configure)" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "$inputs"

revision="unknown" epoch="${SOURCE_DATE_EPOCH:-}"
if git -C "$repo" rev-parse HEAD >/dev/null 2>&1; then
  revision="$(git -C "$repo" rev-parse HEAD)"
  if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then revision="$revision-dirty"; fi
  epoch="${epoch:-$(git -C "$repo" log -1 --format=%ct)}"
fi
epoch="${epoch:-0}"

mkdir -p "$out"
out="$(cd "$out" && pwd)"
store="$out/.store"
store_flags=(--root "$store/root" --runroot "$store/run" --storage-driver vfs)
cleanup() { rm -rf "$store"; }
trap cleanup EXIT

for image in "${images[@]}"; do
  name="flotilla-$image"
  ref="$prefix/$name:$FLOTILLA_VERSION"
  archive="$out/$name-$FLOTILLA_VERSION.tar"
  t0=$(date +%s)
  "$repo/images/stage-rootfs.sh" "$image" "$build_dir" "$out/$image"
  rm -rf "$store" "$archive"
  "$builder" "${store_flags[@]}" build --quiet --isolation chroot --timestamp "$epoch" \
    --build-arg "VERSION=$FLOTILLA_VERSION" --build-arg "REVISION=$revision" \
    -f "$repo/images/$image/Containerfile" -t "$ref" "$out/$image/rootfs" >/dev/null
  "$builder" "${store_flags[@]}" push --quiet "$ref" "oci-archive:$archive:$ref"
  rm -rf "$store"
  unpacked=$(du -sb "$out/$image/rootfs" | cut -f1)
  printf 'build-images: %s  %s  archive %d MB, root filesystem %d MB, %d s\n' "$ref" "$archive" \
    $(( $(stat -c %s "$archive") / 1000000 )) $(( unpacked / 1000000 )) $(( $(date +%s) - t0 ))
done
echo "build-images: revision $revision; push with scripts/push-images.sh REGISTRY (docs/images.md)"
