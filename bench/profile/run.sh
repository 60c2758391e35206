#!/usr/bin/env bash
# Compares `headroom profile` with `wc -l` and the seed's awk script on
# generated key=value request logs (default 1 GiB in /tmp, deleted after),
# one per line shape of bench/profile/gen:
#
#   bench/profile/run.sh [SIZE_BYTES] [RUNS] [SHAPE...]
#
#   gateway  an API gateway's line, ~190 bytes (the default shapes: both)
#   short    2026-11-20T10:00:00.000Z level=info msg=done model=llama req_id=r1 input_tokens=2332 output_tokens=242 status=200
#
# wc -l and headroom run RUNS times each, interleaved, and the best time of
# each counts (the machine may be busy); awk runs once. The file is read
# once before timing so every tool finds it in the page cache. "startup"
# is headroom on a one-line log: what a run costs before its first byte.
set -euo pipefail
size="${1:-1073741824}"
runs="${2:-5}"
shift $(( $# < 2 ? $# : 2 ))
shapes=("$@")
[ $# -eq 0 ] && shapes=(gateway short)
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d /tmp/headroom-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT

( cd "$root" && go build -o "$work/gen" ./bench/profile/gen && go build -o "$work/headroom" ./cmd/headroom )
echo "$(nproc) CPUs; awk is $(awk -W version 2>&1 | head -1)"

now() { date +%s.%N; }
# time1 CMD...: the wall time of one run, in seconds.
time1() { local s e; s=$(now); "$@" > /dev/null; e=$(now); echo "$e - $s" | bc -l; }
lower() { if [ "$(echo "$1 < $2" | bc -l)" = 1 ]; then echo "$1"; else echo "$2"; fi; }

for shape in "${shapes[@]}"; do
  log="$work/requests-$shape.log"
  "$work/gen" -o "$log" -size "$size" -shape "$shape"
  head -1 "$log" > "$work/one.log"
  cat "$log" > /dev/null
  lines=$(wc -l < "$log")
  echo
  echo "shape $shape: $(( $(stat -c %s "$log") >> 20 )) MiB, $lines lines"
  wc_t=9999; hr_t=9999; st_t=9999
  for _ in $(seq "$runs"); do
    wc_t=$(lower "$(time1 wc -l "$log")" "$wc_t")
    hr_t=$(lower "$(time1 "$work/headroom" profile "$log")" "$hr_t")
    st_t=$(lower "$(time1 "$work/headroom" profile "$work/one.log")" "$st_t")
  done
  s=$(now); awk -f "$here/request_profile.awk" "$log" > /dev/null; e=$(now)
  awk_t=$(echo "$e - $s" | bc -l)

  printf '%-18s %8.3f s\n' "wc -l" "$wc_t" "headroom profile" "$hr_t" "  of it startup" "$st_t" "awk (seed script)" "$awk_t"
  printf 'headroom / wc -l:  %6.2f  (goal: at most 2)\n' "$(echo "$hr_t / $wc_t" | bc -l)"
  printf 'awk / headroom:    %6.1f  (goal: at least 20)\n' "$(echo "$awk_t / $hr_t" | bc -l)"
  rm -f "$log"
done
