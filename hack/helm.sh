#!/usr/bin/env bash
# helm.sh builds the Helm CLI the chart tests use (helm lint, helm template)
# and prints its path, for HEADROOM_HELM:
#
#   HEADROOM_HELM=$(bash hack/helm.sh) go test ./charts/... ./audit/e2e/
#
# Helm is built from the Go module proxy only, from the tool module in
# tools/helm (its go.mod/go.sum pin the version; no go.mod is edited here),
# the way hack/e2e-assets.sh builds kube-apiserver and etcd. The binary is
# cached by version under
#   ${HEADROOM_ASSETS_CACHE:-$HOME/.cache/headroom/e2e}/helm-<v>/helm
# and reused when present. Build times are in docs/ci.md.
#
# Progress goes to stderr; stdout carries only the path.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hmod="$root/tools/helm"

modversion() { # modversion GOMOD MODULE
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}
helm_version=$(modversion "$hmod/go.mod" helm.sh/helm/v3)
client_go=$(modversion "$hmod/go.mod" k8s.io/client-go)
if [[ ! $helm_version =~ ^v3\.[0-9]+\.[0-9]+$ ]]; then
  echo "helm: cannot read the helm.sh/helm/v3 version from $hmod/go.mod (got '$helm_version')" >&2
  exit 1
fi
# Helm's Makefile stamps the Kubernetes version its client libraries speak
# (client-go v0.X.Y is Kubernetes 1.X): `helm template` renders for it and
# `helm lint` checks deprecated APIs against it.
if [[ ! $client_go =~ ^v0\.([0-9]+)\.[0-9]+$ ]]; then
  echo "helm: cannot read the k8s.io/client-go version from $hmod/go.mod (got '$client_go')" >&2
  exit 1
fi
k8s_minor=${BASH_REMATCH[1]}

dir="${HEADROOM_ASSETS_CACHE:-$HOME/.cache/headroom/e2e}/helm-$helm_version"
mkdir -p "$dir"
if command -v flock >/dev/null; then
  exec 9>"$dir/.lock"
  flock 9
fi

source "$root/hack/gobuild.sh"
if [[ ! -x "$dir/helm" ]]; then
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in pkg/lint/rules pkg/chartutil; do
    ldflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$k8s_minor"
  done
  # Built the way hack/e2e-assets.sh builds kube-apiserver (same cgo
  # setting, -trimpath, and tools/helm pins the same k8s.io/* patch
  # versions), so the packages they share come from the build cache: after
  # kube-apiserver, helm took 83 s here instead of 414 s cold.
  gobuild "helm $helm_version" "$hmod" "$dir/helm" -trimpath -ldflags="$ldflags" helm.sh/helm/v3/cmd/helm
else
  echo "helm: cached in $dir" >&2
fi
echo "$dir/helm"
