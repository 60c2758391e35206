# gobuild.sh is sourced by the scripts that build the end-to-end tools
# (e2e-assets.sh, helm.sh, promtool.sh). It gives them one way to build:
#
#   gobuild NAME MODDIR OUT [go build flags...] PKG
#
# builds PKG of the tool module in MODDIR to OUT (through OUT.tmp, renamed
# when whole, so an interrupted build never leaves a binary a later run
# would take for a cached one), and says on stderr what it is doing: the
# module download first, then every 30 s how many of the packages the
# binary needs are compiled and for how long it has run, then the time it
# took. A cold kube-apiserver is about 1,800 packages and half an hour on
# a busy 2-core machine: without the count, a slow build and a hung one
# look the same.
#
# There is no time limit here: CI's own (90 minutes, docs/ci.md) is the
# one that bounds a build, and a limit of its own made a slow machine's CI
# fail without saying why (a kube-apiserver build killed at 30 minutes,
# before any test ran).

gobuild() {
  local name=$1 dir=$2 out=$3
  shift 3
  local pkg=${*: -1}
  local t0=$SECONDS
  echo "$name: downloading the modules it needs (go mod download; nothing to do when cached) ..." >&2
  go -C "$dir" mod download >&2
  # What the build compiles: every package it depends on, the standard
  # library's included (-trimpath builds those anew too). -v names each
  # package as it is compiled; a cached one is not named, so a warm build
  # says less than the total.
  local total
  total=$(go -C "$dir" list -deps "${@:1:$#-1}" "$pkg" 2>/dev/null | wc -l) || total="?"
  echo "$name: building $pkg ($total packages; several minutes on a cold build cache) ..." >&2
  go -C "$dir" build -v -o "$out.tmp" "$@" 2>&1 | gobuild_progress "$name" "$total" >&2
  mv -f "$out.tmp" "$out"
  echo "$name: built in $((SECONDS - t0)) s" >&2
}

# gobuild_progress reads go build -v's output: package paths are counted
# and said every 30 s; anything else (a compiler's message, which has a
# space or a '#') is passed through as it comes.
gobuild_progress() {
  local name=$1 total=$2 n=0 start=$SECONDS last=$SECONDS line
  while IFS= read -r line; do
    if [[ $line == *" "* || $line == \#* || -z $line ]]; then
      echo "$line"
      continue
    fi
    n=$((n + 1))
    if ((SECONDS - last >= 30)); then
      echo "$name: $n of $total packages compiled, $((SECONDS - start)) s"
      last=$SECONDS
    fi
  done
  echo "$name: $n packages compiled (the rest were cached)"
}
