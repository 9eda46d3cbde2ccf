#!/usr/bin/env bash
# The skewed job of docs/performance.md ("Dynamic splitting"), in one sitting: 70b73df (the
# straggler read by one lane), this tree with the file cut evenly at plan time (the ideal), and
# this tree with dynamic splitting only. Each run is followed by `verify`.
#
# Usage: bench/scripts/dynamic_splitting.sh NEW_FILE_BACKFILL OLD_FILE_BACKFILL [RUNS]
#   NEW: this tree's Release file-backfill (e.g. build/release/examples/file_backfill/file-backfill)
#   OLD: 70b73df's, built with bench/patches/70b73df-file-backfill-moves-log.patch applied
# Output: one line per run, "build setting seconds", then the means.
set -euo pipefail
new=${1:?new file-backfill}; old=${2:?70b73df file-backfill}; runs=${3:-3}
work=$(mktemp -d /tmp/etlc-dynsplit.XXXXXX); trap 'rm -rf "$work"' EXIT
out=/dev/shm/etlc-dynsplit-out.$$; trap 'rm -rf "$work" "$out"' EXIT
"$new" generate --output "$work/in" --files 51 --one-big 50 --total-bytes 50000000 --seed 7 >/dev/null
common=(--input "$work/in" --output "$out" --members 4 --max-in-flight 2 --split-bytes 600000
        --throttle-bytes-per-s 1000000 --progress none)
run() {  # label, command...
  local label=$1; shift
  rm -rf "$out"
  local t0 t1
  t0=$(date +%s.%N); "$@" >"$work/log" 2>&1; t1=$(date +%s.%N)
  "$new" verify --input "$work/in" --output "$out" >"$work/verify" 2>&1 ||
    { echo "verify failed after $label"; cat "$work/verify"; exit 1; }
  printf '%s %.2f\n' "$label" "$(echo "$t1 - $t0" | bc)" | tee -a "$work/times"
}
for ((i = 1; i <= runs; ++i)); do
  run 70b73df env FB_THROTTLE_PER=lane "$old" run "${common[@]}"
  run ideal "$new" run "${common[@]}" --throttle-per lane --cut-files true --dynamic-splitting false
  run dynamic "$new" run "${common[@]}" --throttle-per lane --cut-files false
done
awk '{s[$1]+=$2; n[$1]++} END {for (k in s) printf "mean %s %.2f s\n", k, s[k]/n[k]}' "$work/times"
