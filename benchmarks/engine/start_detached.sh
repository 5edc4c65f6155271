#!/usr/bin/env bash
# Starts benchmarks/engine_e2e.py in a process session of its own, so that it
# outlives the command that started it, and returns at once. For machines
# where one command may not outlast a whole run (on a cold H200 every case
# plus the cost rounds take about 28 minutes): one command starts it, later
# ones wait for it and fetch what it has written (collect_detached.sh).
#
#   start_detached.sh DEADLINE_S JOB_DIR ENGINE_E2E_ARGS...
#
# DEADLINE_S bounds the whole run: then SIGTERM, on which engine_e2e.py stops
# its server, writes what it measured and exits 143 (SIGKILL 120 s later if it
# has not). JOB_DIR (new or empty) gets a copy of benchmarks/ (so later calls
# may replace the working tree), stdout, stderr, report.json (give no --out),
# and, once the run is over, rc (the script's exit status) and done.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DEADLINE_S JOB_DIR ENGINE_E2E_ARGS..." >&2; exit 2; }
deadline=$1 job=$2; shift 2
case $deadline in ''|*[!0-9]*) echo "$0: DEADLINE_S must be whole seconds, not '$deadline'" >&2; exit 2 ;; esac
if [ -e "$job" ] && [ -n "$(ls -A "$job")" ]; then echo "$0: $job is not empty" >&2; exit 2; fi
mkdir -p "$job"; job=$(cd "$job" && pwd)
cp -r "$(cd "$(dirname "$0")/.." && pwd)" "$job/benchmarks"
date -u +%FT%TZ > "$job/started"
setsid bash -c '
  job=$1 deadline=$2; shift 2
  timeout --preserve-status -k 120 -s TERM "$deadline" "${PYTHON:-python3}" "$job/benchmarks/engine_e2e.py" "$@" \
    --out "$job/report.json" > "$job/stdout" 2> "$job/stderr"
  echo $? > "$job/rc"; date -u +%FT%TZ > "$job/done"
' detached "$job" "$deadline" "$@" < /dev/null > /dev/null 2>&1 &
echo "started engine_e2e.py in its own session (deadline ${deadline} s); its files: $job"
