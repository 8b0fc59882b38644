#!/usr/bin/env bash
# One call on a GPU machine (at most 10 minutes a command): measure what the one-H100 model of
# bench_paper_scale.py assumes, then carry on the GPU experiments at paper scale, one after
# another and alone on the card, each with `--resume` and `--max-time`, until BUDGET seconds
# are spent. The store comes back with the results, so the next call resumes where this one
# stopped.
#   1. the GEMM rates (float32, TF32) and the capture probes of both kinds of loop;
#   2. a packed Ghorbani step with CUDA's deterministic index_add against the segment sums
#      (bench_segment_sums.py), and what a launch costs eager and replayed from a CUDA graph
#      (bench_replay.py) at a launch-bound width of the Allen-Zhu grids;
#   3. `lazylab reproduce ID --scale paper --resume` for PLAN (default: the four experiments
#      that need a GPU, docs/paper-scale.md), each given the time left.
# Everything comes back under $OUT: summary.md (per experiment: units stored of all, compute
# seconds, the H100 model's seconds for those units and the ratio, claims where complete;
# then every stored unit's seconds), lazylab.sqlite (the store: put it back at $STORE and
# carry it on the next call), runs.tar.gz (each experiment's results.csv, claims.json,
# config.json and figure) and logs.tar.gz.
#
# On the device, from the repository root, with the wheels the image lacks carried in .whl
# (pydantic, pydantic-core, annotated-types, typing-inspection, typing-extensions) and the
# last call's store carried at runs/device-store/lazylab.sqlite:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD/src && bash bench/device_session.sh
# Dry run on a CPU, every training loop capped at 2 steps (bench/capped_reproduce.py), into a
# scratch store that no real run resumes:
#   DEVICE=cpu QUICK=1 CAP=2 EACH=90 STORE=runs/device-dry PY=.venv/bin/python \
#     bash bench/device_session.sh
set -u
OUT=${OUT:-runs/device}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-0}
CAP=${CAP:-}
PY=${PY:-python3}
BUDGET=${BUDGET:-560}
EACH=${EACH:-}  # at most this many seconds an experiment (default: all the time left)
LOGS=$OUT/logs
STORE=${STORE:-runs/device-store}
export PYTHONUNBUFFERED=1 LAZYLAB_BENCH_JSON=$LOGS/bench.json
mkdir -p "$LOGS" "$STORE"
step() {  # step SECONDS NAME command...: run with a limit, log to $LOGS/NAME.log, go on
    local limit=$1 name=$2
    shift 2
    echo "== $name (limit ${limit} s, at ${SECONDS} s)"
    timeout -k 15 "$limit" "$@" >"$LOGS/$name.log" 2>&1  # KILL 15 s after TERM: a long
    # eigh or GEMM cannot see the TERM until it returns, and the call has a hard limit
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
from lazylab.train import capture as cg, ensemble, packed  # noqa: F401 (they register their probes)
d = torch.device('$DEVICE')
print('float32 GEMM', gemm_flops_per_second(d) / 1e12, 'TFLOP/s')
if d.type == 'cuda':
    torch.backends.cuda.matmul.allow_tf32 = True
    print('TF32 GEMM', gemm_flops_per_second(d, 8192) / 1e12, 'TFLOP/s')
    torch.backends.cuda.matmul.allow_tf32 = False
print({k: cg.capture_works(str(d), k) for k in cg.PROBES})"
if [ "$QUICK" = 1 ]; then epochs=13; else epochs=20; fi
step 60 segment-sums $PY bench/bench_segment_sums.py --device "$DEVICE" \
    --steps $((QUICK == 1 ? 3 : 50))
step 60 segment-sums-test $PY -m pytest -q -p no:cacheprovider tests/test_cuda.py \
    -k segment_sums
step 60 replay-m20-all $PY bench/bench_replay.py --device "$DEVICE" --m 20 --mode all \
    --epochs "$epochs"
plan=${PLAN:-"allenzhu-performance allenzhu-alpha arora-complexity nichani-taylor"}
if [ -n "$CAP" ]; then run=("$PY" bench/capped_reproduce.py "$CAP"); else run=("$PY" -m lazylab); fi
for id in $plan; do
    left=$((BUDGET - SECONDS - 40))  # 40 s kept for the summary and the archives
    if [ -n "$EACH" ] && [ "$EACH" -lt "$left" ]; then left=$EACH; fi
    if [ "$left" -lt 60 ]; then
        echo "== $id: not started, ${left} s left"
        continue
    fi
    step $((left + 30)) "run-$id" "${run[@]}" reproduce "$id" --scale paper \
        --device "$DEVICE" --out "$STORE" --resume --max-time "$left" --yes
done
$PY bench/device_summary.py "$STORE" $plan >"$OUT/summary.md"
grep -h "runs eagerly" "$LOGS"/*.log | sort | uniq -c >>"$OUT/summary.md"
head -n 40 "$OUT/summary.md"
cp "$STORE/lazylab.sqlite" "$OUT/lazylab.sqlite" 2>/dev/null
tar czf "$OUT/runs.tar.gz" -C "$STORE" --exclude='*.svg' --exclude='.*.lock' \
    --exclude='lazylab.sqlite*' .
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
echo "done in ${SECONDS} s; $(ls "$OUT")"
