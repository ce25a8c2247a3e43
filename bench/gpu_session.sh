#!/bin/bash
# One short session on a lent GPU machine (the device tool): what issues 37 and 38 ask of a GPU.
#   1. the time of one client step on each of the papers' full-size models (bench/rehearsal_steps.py,
#      paper profile, rehearsal data), and the paper profile's predicted GPU-hours from it;
#   2. the laptop pass of the tour and FedOTP on the GPU, several runs sharing the card
#      (fedrepro.execute.local.default_workers), cut at a time limit: the store keeps every run
#      that finished, with its own training time, to set beside the CPU pass.
# Everything lands in $OUT (at most 8 files come back). The machine has no network: the packages
# its image lacks travel as wheels in .gpu/whl, Fashion-MNIST in .gpu/data (both git-ignored):
#   mkdir -p .gpu/whl .gpu/data/fashion_mnist && cp /usr/share/datasets/fashion-mnist/* .gpu/data/fashion_mnist/
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d .gpu/whl open_clip_torch==3.3.0 timm==1.0.31 ftfy wcwidth
# Run there:  bash bench/gpu_session.sh PHASE=SECONDS ...   (default: steps=150 gpu=330), where PHASE is
#   steps    the full-size model steps;
#   gpu      the tour + FedOTP laptop slice on the GPU, at the default workers (the cores over the threads);
#   gpu4     the same with FEDREPRO_RUNS_PER_GPU=4;
#   cpu      the same on the 16 CPU cores alone (CUDA_VISIBLE_DEVICES empty: device auto is the CPU).
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
  date -u +%FT%TZ; nproc; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -V; git rev-parse --short HEAD 2>/dev/null
} > "$OUT/env.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .gpu/whl/*.whl >> "$OUT/env.txt" 2>&1
export PYTHONPATH=/tmp/site:$PWD
python3 -c "import torch, timm, open_clip; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
torch.cuda.get_device_name(0) if torch.cuda.is_available() else '', 'timm', timm.__version__)" >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

steps() {  # $1: time limit
  t0=$(date +%s)
  FEDREPRO_OUTPUT=/tmp/rehearse timeout "$1" python3 bench/rehearsal_steps.py --data rehearsal: --clients 4 \
    --json "$OUT/gpu_steps.json" --out "$OUT/gpu_cost.json" > "$OUT/steps.log" 2>&1
  echo "rc=$? wall=$(( $(date +%s) - t0 )) s" >> "$OUT/steps.log"
  grep -v "^pep_fedpt/\|^pfedcspc/\|^fedpft/\|^fedotp/\|^00_tour" "$OUT/steps.log" | tail -15
}

slice() {  # $1: name, $2: time limit, then the environment of the pass
  local name=$1 limit=$2
  shift 2
  t0=$(date +%s)
  env "$@" FEDREPRO_OUTPUT=/tmp/lp_$name FEDREPRO_DATA=$PWD/.gpu/data timeout "$limit" python3 -m fedrepro reproduce \
    --profile laptop --only 00_tour,fedotp --no-render > "$OUT/pass_$name.log" 2>&1
  echo "rc=$? wall=$(( $(date +%s) - t0 )) s finished_runs=$(ls /tmp/lp_$name/runs 2>/dev/null | wc -l)" \
    | tee -a "$OUT/pass_$name.log"
  tr '\r' '\n' < "$OUT/pass_$name.log" | grep "^\[reproduce\] plan\|^reproduce laptop" | tail -2
  # The runs without their model states (a few MiB): config, per-round metrics, timing, summary.
  tar czf "$OUT/runs_$name.tgz" -C /tmp/lp_$name --exclude='*.pt' runs 2>/dev/null
}

for phase in "${@:-steps=150 gpu=330}"; do
  for p in $phase; do
    name=${p%%=*} limit=${p#*=}
    echo "== $name (limit $limit s)"
    case $name in
      steps) steps "$limit" ;;
      gpu) slice gpu "$limit" ;;
      gpu4) slice gpu4 "$limit" FEDREPRO_RUNS_PER_GPU=4 ;;
      cpu) slice cpu "$limit" CUDA_VISIBLE_DEVICES= ;;
      *) echo "unknown phase $name (valid: steps, gpu, gpu4, cpu)" ;;
    esac
  done
done
ls -la "$OUT"
