#!/usr/bin/env bash
# redis-server under valgrind (memcheck), used as the test harness's
# REDIS_SERVER by `make valgrind`:
#
#   REDIS_SERVER=$PWD/tests/valgrind-redis.sh cargo test --release --test integration -- enqueue::
#
# The harness checks that the process answering PING is the one it spawned,
# so this script execs valgrind (same pid). One report per server:
# $ORCA_VALGRIND_DIR/vg-<pid>.log (default /tmp/orca-valgrind).
#
# - Debian's redis-server takes malloc from libjemalloc.so.2, and the module
#   allocates through Redis's allocator; --soname-synonyms makes memcheck
#   replace jemalloc's malloc/free too, so module allocations are tracked.
# - The harness stops most servers with SIGKILL, which skips valgrind's
#   exit-time leak check. A watcher therefore asks the live server for a
#   leak check (vgdb leak_check, new definite leaks only) after
#   $ORCA_VALGRIND_LEAK_EVERY seconds (default 1), then at doubling
#   intervals up to 30 s, and appends the answers to vg-<pid>.leaks.
#   Servers shut down cleanly get the full check at exit.
# - tests/valgrind.supp suppresses Redis's own known false positives (LZF).
set -euo pipefail
dir="${ORCA_VALGRIND_DIR:-${TMPDIR:-/tmp}/orca-valgrind}"
mkdir -p "$dir"
server="${ORCA_VALGRIND_REDIS:-$(command -v redis-server)}"
every="${ORCA_VALGRIND_LEAK_EVERY:-1}"
supp="$(cd "$(dirname "$0")" && pwd)/valgrind.supp"
pid=$$
(
  while kill -0 "$pid" 2>/dev/null; do
    sleep "$every"
    kill -0 "$pid" 2>/dev/null || break
    timeout 60 vgdb --pid="$pid" leak_check full definiteleak increased \
      >>"$dir/vg-$pid.leaks" 2>&1 || true
    # Back off (each check scans the heap): 1, 2, 4, ... 30 s.
    every=$(( every * 2 > 30 ? 30 : every * 2 ))
  done
) </dev/null >/dev/null 2>&1 &
exec valgrind --tool=memcheck \
  --soname-synonyms='somalloc=libjemalloc.so*' \
  --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite --error-exitcode=99 \
  --num-callers=40 --vgdb=yes --suppressions="$supp" \
  --log-file="$dir/vg-%p.log" \
  "$server" "$@"
