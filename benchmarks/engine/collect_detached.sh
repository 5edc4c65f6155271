#!/usr/bin/env bash
# Waits (at most MAX_WAIT_S) for a run start_detached.sh began, then copies what
# it has so far into DEST: report.json, stderr, rc and done (once over), and
# logs.tgz (the servers' logs under WORK/logs). Prints the progress lines and
# each log's last line. Exits 0 once the run is over, 3 while it still runs.
#
#   collect_detached.sh JOB_DIR WORK MAX_WAIT_S DEST
set -uo pipefail
[ $# -eq 4 ] || { echo "usage: $0 JOB_DIR WORK MAX_WAIT_S DEST" >&2; exit 2; }
job=$1 work=$2 wait_s=$3 dest=$4
[ -d "$job" ] || { echo "$0: no job folder $job" >&2; exit 2; }
end=$((SECONDS + wait_s))
while [ $SECONDS -lt $end ] && [ ! -f "$job/done" ]; do sleep 3; done
mkdir -p "$dest"
for f in report.json stderr rc done; do [ ! -f "$job/$f" ] || cp "$job/$f" "$dest/"; done
[ ! -d "$work/logs" ] || tar czf "$dest/logs.tgz" -C "$work" logs
echo "started $(cat "$job/started"), now $(date -u +%FT%TZ)"
tail -n 20 "$job/stderr" 2>/dev/null
for f in "$work"/logs/*.log; do
  [ -f "$f" ] && echo "== $(basename "$f"): $(tail -n 1 "$f" | cut -c1-200)"
done
if [ -f "$job/done" ]; then echo "over: exit $(cat "$job/rc")"; exit 0; fi
echo "still running"; exit 3
