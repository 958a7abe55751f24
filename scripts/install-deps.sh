#!/usr/bin/env bash
# Installs Flotilla's build and test dependencies from Debian's packages: exactly what the build
# links and what the tests run (every package below is used; nothing is installed "for later").
# Idempotent: it only calls apt-get when a package is missing, so `make test`
# on a machine that already has everything costs a dpkg query, not a network round trip.
# kubectl and Helm are not Debian packages: scripts/install-tools.sh fetches them through npm.
set -euo pipefail

packages=(
  # the build: compiler, CMake, ccache, and the libraries the rooms link
  build-essential cmake ccache pkg-config git
  libssl-dev openssl ca-certificates
  nlohmann-json3-dev libyaml-cpp-dev libre2-dev
  libgtest-dev libgmock-dev googletest
  # the tests: pgrep (process-group checks), gnuplot (simulate --sweep plots), Prometheus and
  # promtool (the chart's rules, `promtool check metrics` on a scrape, a real server in an e2e test)
  procps gnuplot-nox prometheus
  # scripts/install-tools.sh: npm fetches kubectl and Helm, unzip unpacks them
  unzip
  # make images and tests/images: buildah builds the images (no daemon, no registry), skopeo
  # inspects the OCI archives, umoci unpacks them (~11 s to install; the test runs in CI)
  buildah skopeo umoci
)
# Debian's nodejs and npm, unless a Node.js with npm is already there (a nodesource build ships
# npm inside its nodejs package, and Debian's npm would conflict with it).
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

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
