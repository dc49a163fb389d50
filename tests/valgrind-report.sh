#!/usr/bin/env bash
# Summarize the valgrind reports written by tests/valgrind-redis.sh:
#   tests/valgrind-report.sh [dir]     (default $ORCA_VALGRIND_DIR or /tmp/orca-valgrind)
# Prints every memcheck error and every definite leak whose stack has a
# frame of the module (liborca.so / orca::), and counts the rest (Redis's
# own). The command-info strings `cmdinfo::register` leaks on purpose once
# at load time (documented in src/redis/cmdinfo.rs) are counted apart.
# Exit status 1 if anything is attributable to the module.
set -euo pipefail
dir="${1:-${ORCA_VALGRIND_DIR:-${TMPDIR:-/tmp}/orca-valgrind}}"
shopt -s nullglob
files=("$dir"/vg-*.log "$dir"/vg-*.leaks)
if [ ${#files[@]} -eq 0 ]; then
  echo "no valgrind reports in $dir"
  exit 1
fi
awk '
function flush() {
  if (block == "") return
  kind = ""
  if (block ~ /Invalid (read|write|free)|Mismatched free|uninitialised|Conditional jump|Syscall param|overlap|fishy|Argument .* of function/) kind = "error"
  else if (block ~ /are definitely lost/) kind = "leak"
  if (kind != "") {
    orca = (block ~ /liborca\.so|orca::|\(alloc\.rs|redis_module::/)
    once = (block ~ /cmdinfo::register/)
    key = kind (orca ? (once ? "-load" : "-module") : "-redis")
    n[key]++
    if (key == "error-module" || key == "leak-module") {
      shown[key]++
      if (shown[key] <= 5) printf("---- %s (%s)\n%s\n", key, FILENAME, block)
    }
  }
  block = ""
}
FNR == 1 { flush(); servers[FILENAME] = 1 }
{
  line = $0
  sub(/^==[0-9]+== ?/, "", line)
  if (line == "") { flush(); next }
  block = block line "\n"
}
END {
  flush()
  for (f in servers) nf++
  printf("valgrind: %d report files; module errors: %d, module leaks: %d; one-time load leaks (cmdinfo, intentional): %d; Redis-only errors: %d, Redis-only leaks: %d\n",
    nf, n["error-module"] + 0, n["leak-module"] + 0, n["leak-load"] + 0 + n["error-load"], n["error-redis"] + 0, n["leak-redis"] + 0)
  exit (n["error-module"] + n["leak-module"] > 0) ? 1 : 0
}
' "${files[@]}"
