#!/usr/bin/env bash
# Issue 45's device check, in one go on a lent GPU machine (8-9 minutes): every figure the issue asks
# for, written under $OUT (the device tool's output folder; ./gpu-out elsewhere). docs/gpu.md says how to
# run it and what each file holds. Each part has a time limit of its own, so one that overruns leaves the
# others their time; a part's failure is recorded in summary.txt and the next part runs.
#
#   mkdir -p shared/data && cp -r ../shared/data/multi30k shared/data/    # once, in the checkout: data travels
#   bash bench/gpu_check.sh          # then read $OUT/summary.txt first
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
summary="$OUT/summary.txt"
: >"$summary"

part() {  # part NAME SECONDS LOG COMMAND...: run with a time limit, log it, note the outcome
    local name=$1 limit=$2 log=$3
    shift 3
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$log" 2>&1
    local rc=$?
    local verdict="ok"
    [ $rc -eq 124 ] && verdict="TIMED OUT after ${limit} s"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && verdict="FAILED (exit $rc)"
    echo "$name: $verdict in $((SECONDS - start)) s; log $log" | tee -a "$summary"
    tail -n 12 "$OUT/$log" >>"$summary"
    echo >>"$summary"
}

# At most 8 files come back from the device tool: the machine's description goes into the summary.
{
    nvidia-smi
    "$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count())"
} >>"$summary" 2>&1

if [ ! -f shared/data/multi30k/train.de.gz ] && [ ! -f ../shared/data/multi30k/train.de.gz ]; then
    echo "NO DATA: copy Multi30k into the checkout first (shared/data/multi30k; docs/gpu.md)" | tee -a "$summary"
fi

# 1. The lecture recipe: BLEU on test_2016 against training time, 3 minutes (lecture.csv, lecture.png).
part "lecture recipe, 180 s of training" 260 lecture.log \
    "$PY" bench/lecture_gpu.py --seconds 180 --every 20 --out "$OUT"

# 2. Paper-base at ~25k tokens a step: tokens/s and MFU, fp32 / bf16 / grid / grid+compile.
part "paper-base throughput and MFU" 150 gpu_train.log \
    "$PY" bench/gpu_train.py --preset paper-base --max-tokens 25000 --rounds 4 --readback-every 10 \
    --warmup-steps 10 --json "$OUT/gpu_train.json"

# 3. The CUDA tests (AMP, compile, CUDA graphs, no host sync, decoding, resume, the studio's job, NCCL).
part "tests/system/test_cuda.py" 130 test_cuda.log "$PY" -m pytest tests/system/test_cuda.py -q -p no:cacheprovider

# 4. Several GPUs: train_cli under torchrun, 1 process against one per GPU.
gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "${gpus:-0}" -gt 1 ] && [ $SECONDS -lt 420 ]; then  # within the device call's 10 minutes
    part "torchrun scaling, 1 vs $gpus GPUs" 150 scaling.log "$PY" bench/ddp_scaling.py --out /tmp/ddp-runs
else
    echo "torchrun scaling: skipped (${gpus:-0} GPU(s), ${SECONDS} s gone)" | tee -a "$summary"
fi
echo "done; files in $OUT: $(ls "$OUT" | tr '\n' ' ')" | tee -a "$summary"
