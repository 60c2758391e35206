#!/usr/bin/env bash
# e2e-assets.sh builds the kube-apiserver and etcd binaries the end-to-end
# tests run against (controller-runtime envtest), and prints the directory that
# holds them, for KUBEBUILDER_ASSETS:
#
#   KUBEBUILDER_ASSETS=$(bash hack/e2e-assets.sh) go test ./...
#
# Both are built from the Go module proxy only, from the small tool modules in
# tools/kube-apiserver and tools/etcd (their go.mod/go.sum pin the versions; no
# go.mod is edited here). The binaries are cached by version under
#   ${HEADROOM_ASSETS_CACHE:-$HOME/.cache/headroom/e2e}/k8s-<v>-etcd-<v>/
# and reused when present, so only the first run pays the build. Measured on
# 2 cores with cold Go caches: kube-apiserver about 5.5 min and etcd about
# 1 min on an idle machine (26 min and 7 min on a busy shared one); with a
# warm build cache a relink of 15 s; 0 s once cached. It needs about 3.5 GB
# of disk (build cache, module cache, 145 MB of binaries). No build has a
# time limit of its own (hack/gobuild.sh says why); each says every 30 s
# how far it is.
#
# Progress goes to stderr; stdout carries only the directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kmod="$root/tools/kube-apiserver"
emod="$root/tools/etcd"

# The versions come from the tool modules themselves, so the cache key can
# never disagree with what is built.
modversion() { # modversion GOMOD MODULE
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"
}
k8s_version=$(modversion "$kmod/go.mod" k8s.io/kubernetes)
etcd_version=$(modversion "$emod/go.mod" go.etcd.io/etcd/server/v3)
if [[ ! $k8s_version =~ ^v1\.([0-9]+)\.[0-9]+$ ]]; then
  echo "e2e-assets: cannot read the k8s.io/kubernetes version from $kmod/go.mod (got '$k8s_version')" >&2
  exit 1
fi
k8s_minor=${BASH_REMATCH[1]}
if [[ -z $etcd_version ]]; then
  echo "e2e-assets: cannot read the go.etcd.io/etcd/server/v3 version from $emod/go.mod" >&2
  exit 1
fi

assets="${HEADROOM_ASSETS_CACHE:-$HOME/.cache/headroom/e2e}/k8s-$k8s_version-etcd-$etcd_version"
mkdir -p "$assets"

# Two runs at once (CI jobs sharing a cache) must not build over each other.
if command -v flock >/dev/null; then
  exec 9>"$assets/.lock"
  flock 9
fi

source "$root/hack/gobuild.sh"

# build NAME DIR PKG LDFLAGS, unless cached (gobuild: no time limit of its
# own, progress on stderr).
build() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4
  if [[ -x "$assets/$name" ]]; then
    echo "e2e-assets: $name cached in $assets" >&2
    return
  fi
  gobuild "e2e-assets: $name" "$dir" "$assets/$name" -trimpath -ldflags="$ldflags" "$pkg"
}

# Without the version stamp the server reports v0.0.0-master+$Format:%H$,
# which clients (kubectl version, discovery) fail to parse.
v=k8s.io/component-base/version
build kube-apiserver "$kmod" k8s.io/kubernetes/cmd/kube-apiserver \
  "-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=$k8s_minor -X $v.gitTreeState=clean"
build etcd "$emod" go.etcd.io/etcd/server/v3 "-s -w"

# envtest does not need kubectl; link it when there is one, for debugging.
if command -v kubectl >/dev/null && [[ ! -e "$assets/kubectl" ]]; then
  ln -sf "$(command -v kubectl)" "$assets/kubectl"
fi

echo "$assets"
