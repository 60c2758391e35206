#!/usr/bin/env bash
# promtool.sh builds Prometheus's promtool, which checks and unit-tests the
# chart's alert rules (promtool check rules, promtool test rules), and
# prints its path, for HEADROOM_PROMTOOL:
#
#   HEADROOM_PROMTOOL=$(bash hack/promtool.sh) go test ./monitoring/ ./charts/
#
# promtool is built from the Go module proxy only, from the tool module in
# tools/promtool (its go.mod/go.sum pin github.com/prometheus/prometheus; no
# go.mod is edited here), the way hack/e2e-assets.sh builds kube-apiserver.
# The binary is cached by version under
#   ${HEADROOM_ASSETS_CACHE:-$HOME/.cache/headroom/e2e}/promtool-<v>/promtool
# and reused when present. Build times are in docs/ci.md.
#
# Progress goes to stderr; stdout carries only the path.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pmod="$root/tools/promtool"

modversion() { # modversion GOMOD MODULE
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}
version=$(modversion "$pmod/go.mod" github.com/prometheus/prometheus)
if [[ ! $version =~ ^v0\.[0-9]+\.[0-9]+$ ]]; then
  echo "promtool: cannot read the github.com/prometheus/prometheus version from $pmod/go.mod (got '$version')" >&2
  exit 1
fi

dir="${HEADROOM_ASSETS_CACHE:-$HOME/.cache/headroom/e2e}/promtool-$version"
mkdir -p "$dir"
if command -v flock >/dev/null; then
  exec 9>"$dir/.lock"
  flock 9
fi

source "$root/hack/gobuild.sh"
if [[ ! -x "$dir/promtool" ]]; then
  # Built like kube-apiserver in hack/e2e-assets.sh (-trimpath, the same
  # cgo setting), so the packages they share come from the build cache.
  # Prometheus's version package is stamped so `promtool --version` names
  # the release the rules were tested with.
  #
  # remove_all_sd is Prometheus's own build tag (plugins/*.go) that leaves
  # out every service-discovery plugin: the AWS, Azure, GCE, OCI, Outscale,
  # IONOS, Hetzner, ... SDKs, which `check rules` and `test rules` never
  # call. They are 242 of promtool's 1,126 packages and 79 of its 129 MB of
  # Go source (AWS's EC2 client alone is one 14 MB package that compiles on
  # one core); after kube-apiserver, etcd and helm, what is left to compile
  # goes from 101 MB to 21 MB of source. Measured cold times: docs/ci.md.
  v=github.com/prometheus/common/version
  gobuild "promtool $version" "$pmod" "$dir/promtool" -tags remove_all_sd -trimpath -ldflags="-s -w -X $v.Version=$version -X $v.Branch=release" \
    github.com/prometheus/prometheus/cmd/promtool
else
  echo "promtool: cached in $dir" >&2
fi
echo "$dir/promtool"
