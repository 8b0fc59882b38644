#!/usr/bin/env bash
# The first checks to run on a lent GPU, as one call of at most 9 minutes (a drawn task has
# 15 minutes of device time, the machine's start included). What it measures is what the
# one-H100 model of bench_paper_scale.py assumes and no CPU can check
# (docs/paper-scale.md, sections 17 to 19):
#   1. the GEMM rates (float32, TF32) and the capture probes of both kinds of loop; the fused
#      momentum update against its two operations (bench_fused_update.py: the model prices it
#      as one kernel of four passes, section 19);
#   2. what a launch costs eager and replayed from a CUDA graph (bench_replay.py), at the
#      launch-bound widths of the Allen-Zhu grids (allenzhu-performance stays within 10
#      minutes in the graph model while a replayed kernel costs at most 5.8 us; section 19);
#   3. nichani-spectrum at paper scale twice in one process (the second run without the
#      libraries' start-up), the sub-second row the model misses by 4x;
#   4. one panel of allenzhu-performance projected on the device itself, its graphs column
#      priced at the replay cost measured in 2.
# Every step has its own time limit; the logs and runs/bench.json land in $OUT.
#
# On the device, from the repository root, with the wheels the image lacks carried in .whl
# (pydantic, pydantic-core, annotated-types, typing-inspection; see the device README):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD/src && bash bench/device_session.sh
# Here (no GPU) `DEVICE=cpu QUICK=1 bash bench/device_session.sh` runs the same steps small.
set -u
OUT=${OUT:-runs/device}
DEVICE=${DEVICE:-cuda}
QUICK=${QUICK:-0}
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 LAZYLAB_BENCH_JSON=$OUT/bench.json
mkdir -p "$OUT"
step() {  # step SECONDS NAME command...: run with a limit, log to $OUT/NAME.log, go on
    local limit=$1 name=$2
    shift 2
    echo "== $name (limit ${limit} s)"
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "   exit $? after ${SECONDS} s in all"
    tail -n 4 "$OUT/$name.log"
}
{ nvidia-smi || true; $PY -c "import torch; print(torch.__version__, torch.version.cuda)"; } \
    >"$OUT/machine.log" 2>&1
if [ "$QUICK" = 1 ]; then epochs=13; widths="20"; else epochs=20; widths="20 200"; fi
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
if [ "$QUICK" = 1 ]; then sizes=(--G 20 --T 1000 100000); else sizes=(); fi
step 60 fused $PY bench/bench_fused_update.py --device "$DEVICE" "${sizes[@]}"
for m in $widths; do
    for mode in all NTK; do
        step 90 "replay-m$m-$mode" $PY bench/bench_replay.py --device "$DEVICE" --m "$m" \
            --mode "$mode" --epochs "$epochs"
    done
done
spectrum="from lazylab.experiments import get_experiment
import time, torch
e = get_experiment('nichani-spectrum'); p = e.resolve('paper')
for run in ('first', 'second'):
    t0 = time.perf_counter()
    for seed in range(3):
        for key in e.units(p):
            e.run_unit(p, key, seed, torch.device('$DEVICE'))
    if '$DEVICE' == 'cuda':
        torch.cuda.synchronize()
    print(run, 'run of the 6 units:', round(time.perf_counter() - t0, 3), 's')"
if [ "$QUICK" = 1 ]; then
    echo "== spectrum: skipped with QUICK=1 (paper scale takes minutes on a CPU)"
else
    step 90 spectrum $PY -c "$spectrum"
fi
if [ "$QUICK" = 1 ]; then only=nichani-spectrum; set=(); else
    only=allenzhu-performance; set=(--set panels=a); fi
# the graphs column priced at the replay cost just measured (the larger of m = 20's two, where
# the epochs are launch-bound); without a replay (no capture) the model's default
replay_us=$(sed -n 's/.* \([0-9.]*\) us a kernel.*/\1/p' "$OUT"/replay-m20-*.log 2>/dev/null \
    | sort -g | tail -n 1)
if [ -n "$replay_us" ]; then echo "== replayed kernel: $replay_us us"; else
    echo "== replayed kernel: not measured, the model default"; fi
step $((QUICK == 1 ? 120 : 240)) projection $PY bench/bench_paper_scale.py --part projection \
    --device "$DEVICE" --only "$only" "${set[@]}" --verbose ${replay_us:+--replay-us "$replay_us"}
echo "done in ${SECONDS} s; logs in $OUT"
