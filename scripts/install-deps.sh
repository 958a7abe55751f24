#!/usr/bin/env bash
# Installs Flotilla's build and test dependencies from Debian's packages.
# Idempotent: it only calls apt-get when a package is missing, so `make test`
# on a machine that already has everything costs a dpkg query, not a network round trip.
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libssl-dev openssl
  nlohmann-json3-dev libyaml-cpp-dev libre2-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libspdlog-dev libcpprest-dev
  gnuplot-nox
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
