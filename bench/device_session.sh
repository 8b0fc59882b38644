#!/usr/bin/env bash
# One call on a lent GPU (a drawn task has 15 minutes of device time, the machine's start
# included): measure what the one-H100 model of bench_paper_scale.py assumes, then run as many
# unmeasured experiments at paper scale as fit, one after another and alone on the card, so
# that each wall time can be set against its projection (docs/paper-scale.md).
#   1. the GEMM rates (float32, TF32) and the capture probes of both kinds of loop;
#   2. a packed Ghorbani step with CUDA's deterministic index_add against the sums over runs
#      of equal-sized members that replaced it (bench_segment_sums.py; section 24);
#      what a launch costs eager and replayed from a CUDA graph (bench_replay.py) at a
#      launch-bound width of the Allen-Zhu grids (allenzhu-performance is within 10 minutes
#      in the graph model while a replayed kernel costs at most 5.8 us; section 19);
#   3. `lazylab reproduce ID --scale paper` for the batched experiments never run on a GPU,
#      in order of what they test, each with `--max-time` and a hard limit, skipped when the
#      time left cannot hold it (BUDGET seconds for the whole script).
# Everything comes back in three files: summary.md (one row per experiment: status, wall
# time, units, claims; then every stored unit's seconds, and any loop that could not be
# captured), runs.tar.gz (the store, and each experiment's results.csv, claims.json,
# config.json and figure) and logs.tar.gz (the logs and bench.json).
#
# On the device, from the repository root, with the wheels the image lacks carried in .whl
# (pydantic, pydantic-core, annotated-types, typing-inspection, typing-extensions; see the
# device README):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD/src && bash bench/device_session.sh
# Here (no GPU) `DEVICE=cpu QUICK=1 bash bench/device_session.sh` runs the same steps small.
set -u
OUT=${OUT:-runs/device}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-0}
PY=${PY:-python3}
BUDGET=${BUDGET:-560}
LOGS=$OUT/logs
STORE=$OUT/store
export PYTHONUNBUFFERED=1 LAZYLAB_BENCH_JSON=$LOGS/bench.json
mkdir -p "$LOGS" "$STORE"
step() {  # step SECONDS NAME command...: run with a limit, log to $LOGS/NAME.log, go on
    local limit=$1 name=$2
    shift 2
    echo "== $name (limit ${limit} s, at ${SECONDS} s)"
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
    echo "   exit $? at ${SECONDS} s"
    tail -n 3 "$LOGS/$name.log"
}
{ nvidia-smi || true; $PY -c "import torch; print(torch.__version__, torch.version.cuda)"; } \
    >"$LOGS/machine.log" 2>&1
head -n 12 "$LOGS/machine.log"
step 60 probes $PY -c "
import torch, sys
sys.path.insert(0, 'bench')
from bench_paper_scale import gemm_flops_per_second
from lazylab.train import capture as cg
d = torch.device('$DEVICE')
print('float32 GEMM', gemm_flops_per_second(d) / 1e12, 'TFLOP/s')
if d.type == 'cuda':
    torch.backends.cuda.matmul.allow_tf32 = True
    print('TF32 GEMM', gemm_flops_per_second(d, 8192) / 1e12, 'TFLOP/s')
    torch.backends.cuda.matmul.allow_tf32 = False
print({k: cg.capture_works(str(d), k) for k in cg.PROBES})"
if [ "$QUICK" = 1 ]; then epochs=13; scale=quick; else epochs=20; scale=paper; fi
step 60 segment-sums $PY bench/bench_segment_sums.py --device "$DEVICE" \
    --steps $((QUICK == 1 ? 3 : 50))
step 60 segment-sums-test $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py \
    -k segment_sums
step 60 replay-m20-all $PY bench/bench_replay.py --device "$DEVICE" --m 20 --mode all \
    --epochs "$epochs"
# id:seconds, the seconds the one-H100 model projects (docs/paper-scale.md, summary): the
# packed Ghorbani grids first (the batched path never run on a GPU), then the Allen-Zhu
# ensemble with its captured epochs, then the Bai & Lee experiments never completed.
# PLAN overrides it (the first lease, 2026-11-28, ran the four Ghorbani ones: section 24).
plan=${PLAN:-"ghorbani-mg-samples:37 ghorbani-qf-samples:39 ghorbani-qf-width:48
ghorbani-mg-width:72 allenzhu-norm:101 bailee-landscape:57 bailee-higher-order:19
bailee-expressivity:30 bailee-generalization:4"}
for spec in $plan; do
    id=${spec%%:*}
    est=${spec##*:}
    left=$((BUDGET - SECONDS))
    if [ "$left" -lt $((est + 25)) ]; then
        echo "== $id: skipped, ${left} s left for a ${est} s projection"
        continue
    fi
    max=$((2 * est + 30 < left - 20 ? 2 * est + 30 : left - 20))
    step $((max + 25)) "run-$id" $PY -m lazylab reproduce "$id" --scale "$scale" \
        --device "$DEVICE" --out "$STORE" --max-time "$max" --yes
done
$PY - "$STORE" >"$OUT/summary.md" <<'EOF'
import json, pathlib, sys
print("| experiment | status | wall s | compute s | units | claims held |")
print("|---|---|---|---|---|---|")
cfg, c = None, {}
for cfg in sorted(pathlib.Path(sys.argv[1]).glob("*/config.json")):
    c = json.loads(cfg.read_text())
    t = c.get("timing", {})
    claims = cfg.with_name("claims.json")
    held = "-"
    if claims.exists():
        cl = json.loads(claims.read_text())
        held = f"{sum(x['held'] for x in cl)}/{len(cl)}"
        failed = [x["id"] for x in cl if not x["held"]]
        held += f" (failed: {', '.join(failed)})" if failed else ""
    print(f"| {c['experiment']} | {c.get('status')} | {t.get('wall_seconds', 0):.1f} | "
          f"{t.get('compute_seconds', 0):.1f} | {c.get('work_units')} | {held} |")
print(f"\n{c['versions']} on {c['device']}" if cfg else "no experiment ran")
EOF
# every stored unit's seconds and finish time: where an experiment's time went
$PY - "$STORE/lazylab.sqlite" >>"$OUT/summary.md" <<'EOF'
import sqlite3, sys
print("\n| experiment | unit | seed | seconds | finished |\n|---|---|---|---|---|")
try:
    units = sqlite3.connect(sys.argv[1]).execute(
        "select experiment, unit_key, seed_index, seconds, finished_at from units "
        "order by finished_at").fetchall()
except sqlite3.OperationalError:  # nothing stored
    units = []
for r in units:
    print("| " + " | ".join(str(v) for v in r) + " |")
EOF
grep -h "runs eagerly" "$LOGS"/*.log | sort | uniq -c >>"$OUT/summary.md"
head -n 40 "$OUT/summary.md"
tar czf "$OUT/runs.tar.gz" -C "$STORE" --exclude='*.svg' --exclude='.*.lock' . \
    && rm -rf "$STORE"
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
echo "done in ${SECONDS} s; $(ls "$OUT")"
