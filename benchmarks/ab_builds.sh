#!/usr/bin/env bash
# Two builds of hwtune, one benchmark script each, alternated: A B A B ...
# (issue #45's "bench_foundation, bench_engine and bench_peers ratios
# unchanged within noise before/after, measured in one session on one CPU,
# alternated"). Each build runs its own copy of the script (the scripts'
# APIs move with the code), so a ratio compares like with like.
#
#   bash benchmarks/ab_builds.sh OUTDIR ROUNDS PY_A TREE_A PY_B TREE_B SCRIPT [ARGS...]
#
# e.g. PY_A=/work/wt/before/.venv/bin/python TREE_A=/work/wt/before (the
# commit before the house step) against this tree's venv. Every run's output
# goes to OUTDIR/SCRIPT.{a,b}.N.txt with the 1-minute load before and after.
set -u
out=${1:?usage}; rounds=${2:?}; pya=${3:?}; ta=${4:?}; pyb=${5:?}; tb=${6:?}; script=${7:?}
shift 7
mkdir -p "$out"
name=$(basename "$script" .py)
for n in $(seq 1 "$rounds"); do
  for side in a b; do
    if [ "$side" = a ]; then py=$pya; tree=$ta; else py=$pyb; tree=$tb; fi
    f="$out/$name.$side.$n.txt"
    echo "load before $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)" > "$f"
    (cd "$tree" && "$py" "benchmarks/$script" "$@") >> "$f" 2>&1
    echo "exit $? load after $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)" >> "$f"
  done
done
