#!/usr/bin/env bash
# The paper-scale experiments a CPU can finish (docs/paper-scale.md, "CPU" and "CPU,
# resumed"), run on one core in slices of `--max-time` with `--resume`, from a worktree pinned
# at one revision, so that edits to the checkout never change the code a resumed run executes
# (`--resume` refuses a changed source tree).
#
#   REV=73c6cbb bash bench/paper_cpu_runs.sh          # in the background: nohup ... &
#
# REV: the revision whose code runs (default: the one that started bench/paper-cpu's store);
# STORE: the run folder (default runs/paper-cpu; seeded from bench/paper-cpu/lazylab.sqlite,
# the store of the runs in progress, when it has none); CORE: the core to pin to (default 1);
# SLICE: --max-time of each slice (default 20m). Each slice is logged in $STORE/log.tsv
# (experiment, slice, exit code, start and end epoch seconds, wall seconds, peak RSS in KB).
# A finished experiment: record it with bench/paper_scale_page.py --add-run $STORE ID
# --wall SECONDS --command "...", which copies its outputs into docs/paper-scale/runs.
set -u
cd "$(dirname "$0")/.."
REV=${REV:-73c6cbb}
STORE=${STORE:-runs/paper-cpu}
CORE=${CORE:-1}
SLICE=${SLICE:-20m}
PY=${PY:-$PWD/.venv/bin/python}
TREE=${TREE:-$PWD/../paper-run-$REV}
IDS=${IDS:-"bailee-higher-order bailee-expressivity allenzhu-norm ghorbani-mg-width
bailee-landscape ghorbani-qf-width"}
[ -d "$TREE" ] || git worktree add --detach "$TREE" "$REV" >/dev/null || exit 2
mkdir -p "$STORE"
if [ ! -f "$STORE/lazylab.sqlite" ] && [ -f bench/paper-cpu/lazylab.sqlite ]; then
    cp bench/paper-cpu/lazylab.sqlite "$STORE/lazylab.sqlite"
fi
export PYTHONPATH=$TREE/src OMP_NUM_THREADS=1
for id in $IDS; do
    for slice in $(seq 1 200); do
        t0=$(date +%s.%N)
        /usr/bin/time -f "%e %M" -o "$STORE/$id.time" taskset -c "$CORE" "$PY" -m lazylab \
            reproduce "$id" --scale paper --threads 1 --device cpu --out "$STORE" --resume \
            --max-time "$SLICE" -y >"$STORE/$id.log.$slice" 2>&1
        rc=$?
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$slice" "$rc" "$t0" "$(date +%s.%N)" \
            "$(tail -n 1 "$STORE/$id.time")" >>"$STORE/log.tsv"
        [ "$rc" -eq 3 ] || break
    done
done
