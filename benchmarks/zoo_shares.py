"""bench_zoo.py --json rows as a markdown table, with the share of the FMA
peak recomputed from peaks given on the command line: for a table whose
run found a stored scan taken under load (bench_zoo.py reads the peak from
its database's last scan), take a quiet `hwtune scan --quick` and pass its
FP32 FMA peaks here. Shares are of nominal FLOPs (a Winograd 3x3 does
fewer), so a model can show near or above 100%.

usage: python benchmarks/zoo_shares.py ZOO.json 1=117.2 2=231.9"""
import json
import sys


def main(argv):
    doc = json.load(open(argv[0]))
    peaks = {int(k): float(v) for k, v in (a.split("=") for a in argv[1:])}
    print("| model | T | hwtune ms | ORT ms | x ORT | max err | % FMA peak | load |")
    print("|---|---|---|---|---|---|---|---|")
    for row in doc["rows"]:
        for key in sorted(k for k in row if k.startswith(("untuned_t", "tuned_t"))):
            r = row[key]
            t = int(key.rsplit("_t", 1)[1])
            share = (100 * row["gflop"] / (r["hwtune_ms"] / 1e3) / peaks[t]
                     if row.get("gflop") and t in peaks and r.get("hwtune_ms") else None)
            load = "/".join(f"{x:.1f}" for x in r.get("load") or [])
            print(f"| {row['model']}{' (tuned)' if key.startswith('tuned') else ''} | {t} | "
                  f"{r.get('hwtune_ms', float('nan')):.2f} | {r.get('ort_ms', float('nan')):.2f} | "
                  f"{r.get('ort_ratio', float('nan')):.2f} | {r.get('max_err', float('nan')):.1e} | "
                  f"{share:.0f} | {load} |" if share is not None else
                  f"| {row['model']} | {t} | {r.get('hwtune_ms')} | {r.get('ort_ms')} | "
                  f"{r.get('ort_ratio')} | {r.get('max_err')} | - | {load} |")


if __name__ == "__main__":
    main(sys.argv[1:])
