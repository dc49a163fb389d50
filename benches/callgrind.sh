#!/usr/bin/env bash
# Server instructions per command, counted by callgrind (they do not depend
# on the machine's load, unlike throughput):
#
#   cargo build --release && benches/callgrind.sh [module.so] [requests]
#
# Starts redis-server with the module under `valgrind --tool=callgrind` with
# instrumentation off, then for each workload: zero the counters, switch
# instrumentation on, run redis-benchmark (-c 50 -P 16, the 1 KB job of
# benches/job.json, as benches/run.py does), switch it off and dump. Prints
# instructions per request (everything the server does: read, parse,
# dispatch, command, reply, event loop) and the inclusive cost per request of
# the adapter's main functions. Dumps stay in $OUT (default
# /tmp/orca-callgrind) for callgrind_annotate.
#
# Workloads: SET of the same payload (the yardstick), ENQUEUE (new job each time), then POP LEASE 0 and
# POP LEASE 600000 each on a queue filled (uninstrumented) with a few more
# jobs than it pops.
set -euo pipefail
cd "$(dirname "$0")/.."
so="${1:-target/release/liborca.so}"
n="${2:-20000}"
out="${OUT:-/tmp/orca-callgrind}"
rm -rf "$out"
mkdir -p "$out"
cp "$so" "$out/liborca.so"
tpl="$(tr -d '\n' <benches/job.json)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg.out" \
  redis-server --port "$port" --loadmodule "$out/liborca.so" --save '' \
  --appendonly no --dir "$out" >"$out/server.log" 2>&1 &
vg=$!
trap 'kill $vg 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  redis-cli -p "$port" PING >/dev/null 2>&1 && break
  sleep 0.2
done

cli() { redis-cli -p "$port" "$@"; }
bench() { # requests pipeline args...
  local req=$1 p=$2
  shift 2
  redis-benchmark -p "$port" -c 50 -n "$req" -P "$p" -r 1000000000 -q "$@" >/dev/null
}
measure() { # label args...
  local label=$1
  shift
  cli CONFIG RESETSTAT >/dev/null
  callgrind_control -z "$vg" >/dev/null
  callgrind_control -i on "$vg" >/dev/null
  bench "$n" 16 "$@"
  callgrind_control -i off "$vg" >/dev/null
  callgrind_control -d "$label" "$vg" >/dev/null
  sleep 1
  local f
  f="$(ls -t "$out"/cg.out.* | head -1)"
  mv "$f" "$out/$label.out"
  local total calls
  total="$(grep -m1 '^totals:' "$out/$label.out" | awk '{print $2}')"
  calls="$(cli INFO commandstats | tr -d '\r' | grep -i "^cmdstat_$(echo "$1" | tr 'A-Z' 'a-z'):" | sed 's/^[^:]*:calls=\([0-9]*\),.*/\1/')"
  printf '%-14s %8d calls  %8.0f instructions/call\n' "$label" "$calls" "$(echo "$total / $calls" | bc -l)"
  # Inclusive cost per request of the adapter's functions (and the Redis
  # calls they make); a function inlined in several files is listed by callgrind
  # once per file: keep the largest figure.
  callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$out/$label.out" 2>/dev/null |
    awk -v c="$calls" '
      /^ *[0-9,]+ +\(/ {
        ir = $1; gsub(",", "", ir)
        line = $0; sub(/^ *[0-9,]+ +\([^)]*\) +/, "", line); sub(/ \[.*$/, "", line)
        fn = substr(line, index(line, ":") + 1)
        if (ir + 0 > best[fn]) best[fn] = ir + 0
      }
      END { for (f in best) printf "%10.0f  %s\n", best[f] / c, f }' |
    grep -E 'orca::redis::|orca::core::.*(enqueue|pop_deliveries|parse_config)|^ *[0-9]+  (RedisModule_|moduleNotifyKeyspaceEvent|signalKeyAsReady|notifyKeyspaceEvent|alsoPropagate|addReply|call|processCommand|zmalloc|malloc_usable_size|je_malloc|free)' |
    sort -rn | head -45 || true
}

measure SET SET "job:__rand_int__" "$tpl"
measure ENQUEUE ORCA.ENQUEUE q "$tpl"
for lease in 0 600000; do
  cli FLUSHALL >/dev/null
  bench $((n + n / 20)) 16 ORCA.ENQUEUE q "$tpl"
  measure "POP_LEASE_$lease" ORCA.POP q LEASE "$lease"
  left="$(cli ORCA.LEN q)"
  [ "$left" -gt 0 ] || echo "warning: queue ran empty during POP LEASE $lease"
done
cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$vg" 2>/dev/null || true
trap - EXIT
