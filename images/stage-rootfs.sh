#!/usr/bin/env bash
# Assembles the root filesystem of one Flotilla image from a CMake build: the one input both
# ways of building an image COPY (scripts/build-images.sh offline, `podman build` / `docker build`
# with images/<image>/Containerfile), so both produce the same files.
#
# Usage: images/stage-rootfs.sh operator|worker BUILD_DIR OUT_DIR
#   BUILD_DIR holds images/inputs.env (written by CMake: version, program paths, dlopen'ed
#   libraries); OUT_DIR/rootfs is replaced (the build context), OUT_DIR/debug gets the
#   programs' debug info (outside the context: it is not in the image).
#
# What goes in (and nothing else):
#   - the programs, stripped, in /usr/local/bin (operator: flotilla-operator; worker:
#     flotilla-sidecar and flotilla-worker);
#   - the worker's dlopen'ed libraries (libnccl.so.2 when the build has NCCL), under their SONAME;
#   - the shared-library closure of all of them (ldd on this machine) in /usr/lib/<multiarch>,
#     the loader at its PT_INTERP path (merged /usr: /lib, /lib64, /bin are links into /usr),
#     each library's licence (Debian: /usr/share/doc/<package>/copyright; NVIDIA wheels: the
#     dist-info licences);
#   - /etc/passwd and /etc/group with root and `flotilla` (65532:65532), /etc/nsswitch.conf,
#     the CA bundle (/etc/ssl/certs/ca-certificates.crt, OpenSSL's default paths link to it),
#     /tmp (1777), the one writable place and `flotilla`'s home (mount an emptyDir there when
#     the root filesystem is read-only).
# Nothing is writable by 65532 but /tmp (the Containerfile's COPY makes every file root's), so
# the image runs with a read-only root filesystem. No tzdata: every time the programs print is UTC.
set -euo pipefail

usage() { echo "usage: $0 operator|worker BUILD_DIR OUT_DIR" >&2; exit 2; }
[ $# -eq 3 ] || usage
image="$1" build_dir="$2" out_dir="$3"
inputs="$build_dir/images/inputs.env"
if [ ! -f "$inputs" ]; then
  echo "stage-rootfs: $inputs is missing: configure the build first (cmake -S . -B $build_dir)" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "$inputs"

programs=() dlopened=()
case "$image" in
  operator) programs=("$OPERATOR_BINARY") ;;
  worker)
    programs=("$SIDECAR_BINARY" "$WORKER_BINARY")
    # shellcheck disable=SC2206
    dlopened=($WORKER_DLOPEN_LIBRARIES)
    ;;
  *) usage ;;
esac
for p in "${programs[@]}" "${dlopened[@]}"; do
  if [ ! -f "$p" ]; then
    echo "stage-rootfs: $p is missing: build it first (cmake --build $build_dir --target images)" >&2
    exit 1
  fi
done

multiarch="$(gcc -print-multiarch)"
root="$out_dir/rootfs"
rm -rf "$root" "$out_dir/debug"
mkdir -p "$root" "$out_dir/debug"
root="$(cd "$root" && pwd)"
libdir="usr/lib/$multiarch"

# Merged /usr, as Debian 12: the loader's /lib64/ld-linux-x86-64.so.2 and /lib/... resolve
# into /usr. Links are relative so they resolve inside the root from the host, too.
mkdir -p "$root"/{usr/bin,usr/local/bin,usr/lib64,"$libdir",etc/ssl/certs,usr/lib/ssl,usr/share/doc,tmp}
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
chmod 1777 "$root/tmp"

package_licence() {  # Debian package $1's copyright file into the root
  [ -f "/usr/share/doc/$1/copyright" ] || return 1
  mkdir -p "$root/usr/share/doc/$1"
  cp "/usr/share/doc/$1/copyright" "$root/usr/share/doc/$1/copyright"
}

licence_of() {  # copies the licence of the host library $1 into the root
  local path="$1" real pkg dist
  real="$(readlink -f "$path")"
  pkg="$(dpkg-query -S "$path" 2>/dev/null || dpkg-query -S "$real" 2>/dev/null || true)"
  pkg="${pkg%%:*}"
  if [ -n "$pkg" ] && package_licence "$pkg"; then return; fi
  # NVIDIA's CUDA and NCCL wheels: dist-info/<name>/RECORD lists the library by file name.
  for record in "$(dirname "$real")"/../dist-info/*/RECORD; do
    [ -f "$record" ] || continue
    if grep -q "/$(basename "$real")," "$record"; then
      dist="$(dirname "$record")"
      mkdir -p "$root/usr/share/doc/$(basename "$dist")"
      cp -r "$dist/licenses/." "$root/usr/share/doc/$(basename "$dist")/" 2>/dev/null || true
      cp "$dist/METADATA" "$root/usr/share/doc/$(basename "$dist")/METADATA"
      return
    fi
  done
  echo "stage-rootfs: warning: no licence found for $path (not from a Debian package or a wheel)" >&2
}

soname_of() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }

copy_library() {  # host path, name in the root's library folder
  local dest="$root/$libdir/$2"
  [ -e "$dest" ] && return
  cp -L "$1" "$dest"
  chmod 0755 "$dest"
  licence_of "$1"
}

# Every ELF file whose closure goes in: the programs as built and the dlopen'ed libraries.
closure_of=()
for p in "${programs[@]}"; do
  name="$(basename "$p")"
  # Stripped: the image carries no debug info; it is kept beside the image for symbolizing.
  objcopy --only-keep-debug "$p" "$out_dir/debug/$name.debug"
  strip --strip-unneeded -o "$root/usr/local/bin/$name" "$p"
  chmod 0755 "$root/usr/local/bin/$name"
  closure_of+=("$p")
done
for lib in "${dlopened[@]}"; do
  soname="$(soname_of "$lib")"
  copy_library "$lib" "${soname:-$(basename "$lib")}"
  closure_of+=("$lib")
done

interp=""
for elf in "${closure_of[@]}"; do
  # ldd lines: "libfoo.so.1 => /path/libfoo.so.1 (0x...)", the loader as "/lib64/ld-... (0x...)".
  while read -r name arrow path _; do
    if [ "$arrow" = "=>" ]; then
      if [ "$path" = "not" ]; then
        echo "stage-rootfs: $elf needs $name, which this machine does not have" >&2
        exit 1
      fi
      copy_library "$path" "$name"
    elif [[ "$name" == /* ]]; then
      interp="$name"
    fi
  done < <(ldd "$elf")
done
if [ -z "$interp" ]; then
  echo "stage-rootfs: no program loader found in ldd's output" >&2
  exit 1
fi
# The loader lives in the library folder and is reached through its PT_INTERP path.
copy_library "$interp" "$(basename "$interp")"
if [ ! -e "$root$interp" ]; then
  mkdir -p "$(dirname "$root$interp")"
  ln -s "$(realpath --relative-to="$(dirname "$root$interp")" "$root/$libdir/$(basename "$interp")")" "$root$interp"
fi

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/usr/sbin/nologin
flotilla:x:65532:65532:flotilla:/tmp:/usr/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
flotilla:x:65532:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
ln -s ../../../etc/ssl/certs "$root/usr/lib/ssl/certs"
ln -s ../../../etc/ssl/certs/ca-certificates.crt "$root/usr/lib/ssl/cert.pem"
package_licence ca-certificates

# Deterministic modes: nothing in the root is writable by anyone but root, /tmp aside.
find "$root" -path "$root/tmp" -prune -o -type d -exec chmod 0755 {} +
find "$root" -type f -not -perm -u+x -exec chmod 0644 {} +
