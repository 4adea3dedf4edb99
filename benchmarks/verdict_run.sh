#!/usr/bin/env bash
# The verdict figures of issues #41 and #43 in one quiet window, in the order
# the closing note reports them. Run it with nothing else on the machine:
# every step logs the 1-minute load average before it starts, and a figure
# taken while the load exceeds the benchmark's own threads decides nothing.
#
#   bash benchmarks/verdict_run.sh OUTDIR [ZOO_MODELS]
#
# 1. `hwtune scan --quick` into the zoo's database, so bench_zoo's share of
#    the FMA peak is taken from a scan of the same quiet window (bench_zoo
#    reads the peak from its database's last stored scan);
# 2. the zoo table untuned, avx512 (the host's best variant), then
#    HWTUNE_ISA=avx2 (ORT keeps its own ISA: the hard case);
# 3. bench_quant (int8 vs ORT int8: ResNet-50 and BERT-base, the issue's
#    rows; then the mobile CNNs and ViT quantized the same ways) and
#    bench_bf16 (bf16 vs fp32).
set -u
out=${1:?usage: verdict_run.sh OUTDIR [MODELS]}
models=${2:-resnet50,resnext50_32x4d,mobilenet_v2,efficientnet_b0,convnext_tiny,vit_b_16,bert_base,gpt2}
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python}
hw=$(dirname "$(command -v "$py")")/hwtune
mkdir -p "$out"
work="$out/zoo-work"
mkdir -p "$work"

step() {  # step NAME CMD...: log load and time around one command
    local name=$1; shift
    echo "== $name: start $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log.txt"
    "$@" > "$out/$name.txt" 2> "$out/$name.err"
    local rc=$?
    echo "== $name: end $(date -u +%H:%M:%S), exit $rc, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/log.txt"
}

step scan "$hw" scan --quick --db "$work/zoo.db"
step zoo_avx512 "$py" "$here/bench_zoo.py" --models "$models" --threads 1,2 --reps 10 \
    --with ort --workdir "$work" --json "$out/zoo_avx512.json"
step zoo_avx2 env HWTUNE_ISA=avx2 "$py" "$here/bench_zoo.py" --models "$models" --threads 1,2 \
    --reps 10 --with ort --workdir "$work" --json "$out/zoo_avx2.json"
step quant "$py" "$here/bench_quant.py" --threads 1,2 --reps 10
step quant_avx2 env HWTUNE_ISA=avx2 "$py" "$here/bench_quant.py" --threads 1,2 --reps 10
step quant_more "$py" "$here/bench_quant.py" --models mobilenet_v2,efficientnet_b0,vit_b_16 \
    --threads 1,2 --reps 10
step bf16 "$py" "$here/bench_bf16.py" --reps 9
