#!/usr/bin/env bash
# Compares `headroom profile` with `wc -l` and the seed's awk script on a
# generated key=value request log (default 1 GiB in /tmp, deleted after).
#
#   bench/profile/run.sh [SIZE_BYTES] [RUNS]
#
# wc -l and headroom run RUNS times each, interleaved, and the best time of
# each counts (the machine may be busy); awk runs once. The file is read
# once before timing so every tool finds it in the page cache.
set -euo pipefail
size="${1:-1073741824}"
runs="${2:-5}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d /tmp/headroom-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
log="$work/requests.log"

( cd "$root" && go build -o "$work/gen" ./bench/profile/gen && go build -o "$work/headroom" ./cmd/headroom )
"$work/gen" -o "$log" -size "$size"
cat "$log" > /dev/null
lines=$(wc -l < "$log")
echo "log: $log, $(( $(stat -c %s "$log") >> 20 )) MiB, $lines lines; $(nproc) CPUs; awk is $(awk -W version 2>&1 | head -1)"

now() { date +%s.%N; }
# time1 CMD...: the wall time of one run, in seconds.
time1() { local s e; s=$(now); "$@" > /dev/null; e=$(now); echo "$e - $s" | bc -l; }
lower() { if [ "$(echo "$1 < $2" | bc -l)" = 1 ]; then echo "$1"; else echo "$2"; fi; }

wc_t=9999; hr_t=9999
for _ in $(seq "$runs"); do
  wc_t=$(lower "$(time1 wc -l "$log")" "$wc_t")
  hr_t=$(lower "$(time1 "$work/headroom" profile "$log")" "$hr_t")
done
s=$(now); awk -f "$here/request_profile.awk" "$log" > /dev/null; e=$(now)
awk_t=$(echo "$e - $s" | bc -l)

printf '%-18s %8.3f s\n' "wc -l" "$wc_t" "headroom profile" "$hr_t" "awk (seed script)" "$awk_t"
printf 'headroom / wc -l:  %6.2f  (goal: at most 2)\n' "$(echo "$hr_t / $wc_t" | bc -l)"
printf 'awk / headroom:    %6.1f  (goal: at least 20)\n' "$(echo "$awk_t / $hr_t" | bc -l)"
