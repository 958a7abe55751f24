#!/usr/bin/env bash
# make fresh-check: the README's commands on a machine with nothing installed.
#
# What it does:
#   1. builds a clean Debian 12 (bookworm) root filesystem with mmdebstrap (variant minbase:
#      only the essential packages and apt, as a new minimal machine has);
#   2. copies a clean clone of this repository's HEAD (committed work only) to /work/flotilla
#      and ../shared (or $FLOTILLA_SHARED) to /work/shared inside it;
#   3. enters it with chroot (with /proc, /sys, /dev, /dev/pts and /dev/shm mounted) and runs,
#      as root, `apt-get install make` (the one prerequisite the README names) and then each
#      README command given (default: `make test`), with CI=true and a bare environment;
#   4. unmounts everything and removes the root filesystem (unless --keep).
# It fails when any command fails; its log is $FRESH_CHECK_DIR/fresh-check.log.
#
# Usage: sudo scripts/fresh-check.sh [--keep] [--dir DIR] [--] [COMMAND ...]
#   e.g. scripts/fresh-check.sh                      # make test
#        scripts/fresh-check.sh -- make test make demo
# Needs: root (chroot, mounts), network to Debian's mirror and the npm registry (the set-up
# inside fetches packages and kubectl/helm exactly as on a new machine).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
shared="${FLOTILLA_SHARED:-$repo/../shared}"
dir="${FRESH_CHECK_DIR:-/var/tmp/flotilla-fresh-check}"
keep=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1; shift ;;
    --dir) dir="$2"; shift 2 ;;
    --) shift; targets+=("$@"); break ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then targets=(test); fi
# "make test make demo" and "test demo" both name make targets.
make_targets=()
for t in "${targets[@]}"; do [ "$t" = make ] || make_targets+=("$t"); done

if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-check: needs root (mmdebstrap, chroot and mounts); run it with sudo" >&2
  exit 1
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "fresh-check: installing mmdebstrap (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
fi
if [ ! -d "$shared/data" ]; then
  echo "fresh-check: no shared data at $shared (set FLOTILLA_SHARED); the data tests would skip" >&2
  exit 1
fi

root="$dir/root"
log="$dir/fresh-check.log"
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  if [ "$keep" -eq 0 ]; then rm -rf "$root"; fi
}
trap cleanup EXIT

rm -rf "$root"
mkdir -p "$dir"
: >"$log"
step() { echo "fresh-check: $*" | tee -a "$log"; }

step "building a clean Debian 12 root filesystem in $root"
start=$(date +%s)
mmdebstrap --variant=minbase --quiet bookworm "$root" \
  "deb http://deb.debian.org/debian bookworm main" \
  "deb http://deb.debian.org/debian bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main" >>"$log" 2>&1

step "copying a clean clone of HEAD ($(git -C "$repo" rev-parse --short HEAD)) and the shared folder"
mkdir -p "$root/work"
git clone --quiet --no-local "$repo" "$root/work/flotilla"
cp -a "$shared" "$root/work/shared"
# The site's network set-up, not the project's: name resolution, and the certificate
# authorities this machine trusts beyond Debian's (a TLS-inspecting proxy's, say), which the new
# root's ca-certificates picks up when install-deps installs it.
cp /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

# The root filesystem is bound onto itself so that / is a mount point inside the chroot, as on
# a real machine or container: buildah (make images, images_test) makes / private in its own
# mount namespace before applying a layer, which fails with EINVAL when / is a plain folder.
mount --bind "$root" "$root" && mounted+=("$root")
for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case "$m" in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sys "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount -t devpts devpts "$root/dev/pts" -o newinstance,ptmxmode=0666 ;;
  esac
  mounted+=("$root/$m")
done
mkdir -p "$root/dev/shm"
mount -t tmpfs shm "$root/dev/shm" && mounted+=("$root/dev/shm")

# A bare environment, plus the host's CA-bundle variables (node reads NODE_EXTRA_CA_CERTS).
site_env=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE; do
  if [ -n "${!v:-}" ]; then site_env+=("$v=${!v}"); fi
done
in_root() {
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 TERM=dumb CI=true "${site_env[@]}" chroot "$root" /bin/bash -c "$1"
}

step "inside: apt-get install make (the README's one prerequisite)"
in_root "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends make" >>"$log" 2>&1

status=0
for t in "${make_targets[@]}"; do
  step "inside: make $t"
  t0=$(date +%s)
  if in_root "cd /work/flotilla && make $t" >>"$log" 2>&1; then
    step "make $t passed in $(( $(date +%s) - t0 )) s"
  else
    status=$?
    step "make $t FAILED (exit $status) after $(( $(date +%s) - t0 )) s; the end of $log:"
    tail -n 40 "$log"
    break
  fi
done
if [ "$status" -eq 0 ]; then
  # The ctest summary and any skipped test, so a skip for a missing tool is visible.
  grep -E "tests passed|tests failed|Skipped|\*\*\*Skipped" "$log" | tail -n 30 || true
  step "PASS: ${make_targets[*]} on a clean Debian 12 root filesystem in $(( $(date +%s) - start )) s"
fi
exit "$status"
