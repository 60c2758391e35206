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
# of disk (build cache, module cache, 145 MB of binaries).
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

with_timeout() { # with_timeout SECONDS CMD...
  if command -v timeout >/dev/null; then timeout "$@"; else shift; "$@"; fi
}

# build NAME SECONDS MODDIR PKG LDFLAGS: builds into a temporary file and
# renames it, so an interrupted build never leaves a half-written binary that
# a later run would take for a cached one.
build() {
  local name=$1 limit=$2 dir=$3 pkg=$4 ldflags=$5
  if [[ -x "$assets/$name" ]]; then
    echo "e2e-assets: $name cached in $assets" >&2
    return
  fi
  echo "e2e-assets: building $name from $pkg (several minutes on a cold build cache) ..." >&2
  local t0=$SECONDS
  with_timeout "$limit" go -C "$dir" build -trimpath -ldflags="$ldflags" -o "$assets/$name.tmp" "$pkg" >&2
  mv -f "$assets/$name.tmp" "$assets/$name"
  echo "e2e-assets: built $name in $((SECONDS - t0)) s" >&2
}

# Without the version stamp the server reports v0.0.0-master+$Format:%H$,
# which clients (kubectl version, discovery) fail to parse.
v=k8s.io/component-base/version
build kube-apiserver 1800 "$kmod" k8s.io/kubernetes/cmd/kube-apiserver \
  "-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=$k8s_minor -X $v.gitTreeState=clean"
build etcd 900 "$emod" go.etcd.io/etcd/server/v3 "-s -w"

# envtest does not need kubectl; link it when there is one, for debugging.
if command -v kubectl >/dev/null && [[ ! -e "$assets/kubectl" ]]; then
  ln -sf "$(command -v kubectl)" "$assets/kubectl"
fi

echo "$assets"
