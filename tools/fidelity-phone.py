#!/usr/bin/env python3
"""Replays the bigmoe phone captures on the phone-bigmoe machine and compares
the predicted time per decode token with the capture's .metrics files
(docs/FIDELITY.md). Standard library only.

    tools/fidelity-phone.py --colibri build/default/tools/colibri \
        --data ../shared/data/bigmoe-route-traces [--nvme phone-ufs] [--json OUT]

Each capture's route CSV is imported with its llama.cpp log (attention
shape, KV type, hidden size, mapped weights), then replayed with the
capture's settings: --l2-bytes 4000MiB (its cache), --queue-depth 8,
--hidden 2048 (ignored: the log gives the hidden size). Percentiles are by
nearest rank over the 128 decode tokens; the correlation is Pearson's r of
the per-token predicted and measured series.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

MODELS = ("qwen", "gemma")


def nearest_rank(values, p):
    s = sorted(values)
    return s[max(0, math.ceil(p / 100.0 * len(s)) - 1)]


def pearson(a, b):
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    return sab / math.sqrt(saa * sbb)


def read_metrics(path):
    rows, summary = [], {}
    with open(path) as f:
        header = None
        for line in f:
            line = line.strip()
            if line.startswith("# summary"):
                summary = dict(kv.split("=", 1) for kv in line[len("# summary"):].split())
            elif line.startswith("step,"):
                header = line.split(",")
            elif line and header:
                rows.append(dict(zip(header, (float(v) for v in line.split(",")))))
    return rows, summary


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.stdout, out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--colibri", required=True)
    ap.add_argument("--data", required=True, help="the bigmoe-route-traces folder")
    ap.add_argument("--hw", default="phone-bigmoe")
    ap.add_argument("--nvme", default="", help="replace the machine's nvme (e.g. phone-ufs, the cold device)")
    ap.add_argument("--json", default="", help="write the per-token series and figures here")
    ap.add_argument("--csv", default="", help="write the per-token series here: step, then measured and predicted ms per model")
    args = ap.parse_args()
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            trace = os.path.join(tmp, model + ".ctrace")
            run([args.colibri, "trace", "import", "--format", "bmoe-csv", os.path.join(args.data, model + ".route.csv"),
                 "--llama-log", os.path.join(args.data, model + ".log"), "-o", trace])
            cmd = [args.colibri, "replay", trace, "--hw", args.hw, "--l2-bytes", "4000MiB", "--hidden", "2048",
                   "--queue-depth", "8", "--json", "--decode-series"]
            if args.nvme:
                cmd += ["--hw-nvme", args.nvme]
            out, err = run(cmd)
            r = json.loads(out)["runs"][0]
            rows, summary = read_metrics(os.path.join(args.data, model + ".metrics"))
            series = r["decode"]["series"]
            pred = [ns / 1e6 for ns in series["elapsed_ns"]]
            meas = [row["wall_ms"] for row in rows]
            if len(pred) != len(meas):
                sys.exit(f"{model}: {len(pred)} predicted decode tokens, {len(meas)} measured")
            dense = [ns / 1e6 for ns in series["dense_ns"]]
            window = [ns / 1e6 for ns in series["nvme_read_ns"]]
            result[model] = {
                "command": " ".join(cmd[1:]).replace(tmp + "/", ""),
                "warnings": r.get("warnings", []),
                "predicted_ms": pred,
                "measured_ms": meas,
                "pearson_r": pearson(pred, meas),
                "mean": (sum(pred) / len(pred), sum(meas) / len(meas)),
                "p50": (nearest_rank(pred, 50), nearest_rank(meas, 50)),
                "p90": (nearest_rank(pred, 90), nearest_rank(meas, 90)),
                "prefill_ms": (r["ttft_ns"]["p50"] / 1e6, float(summary["prefill_s"]) * 1e3),
                "dense_mean_ms": sum(dense) / len(dense),
                "read_window_mean_ms": sum(window) / len(window),
                "compute_mean_ms": r["decode"]["compute_ns"] / 1e6 / len(pred),
                "measured_compute_mean_ms": sum(row["compute_ms"] for row in rows) / len(rows),
                "measured_stall_mean_ms": sum(row["stall_ms"] for row in rows) / len(rows),
                "measured_mgmt_mean_ms": sum(row["mgmt_ms"] for row in rows) / len(rows),
                "dense_cost": r["dense_cost"],
                "hit_pct_decode": r["hit_pct_decode"],
                "read_mib_per_token": r["decode"]["read_bytes"] / len(pred) / 2**20,
                "measured_read_mib_per_token": sum(row["read_bytes"] for row in rows) / len(rows) / 2**20,
            }
    label = args.hw + (f" (nvme={args.nvme})" if args.nvme else "")
    print(f"| ms per decode token, {label} | " + " | ".join(f"{m} measured | {m} predicted" for m in MODELS) + " |")
    print("|---|" + "---:|" * (2 * len(MODELS)))
    for key in ("mean", "p50", "p90", "prefill_ms"):
        cells = []
        for m in MODELS:
            p, q = result[m][key]
            cells += [f"{q:,.1f}", f"{p:,.1f} ({(p - q) / q * 100:+.1f}%)"]
        print(f"| {key} | " + " | ".join(cells) + " |")
    print("| Pearson r, per token | " + " | ".join(f"| {result[m]['pearson_r']:+.3f}" for m in MODELS) + " |")
    for m in MODELS:
        d = result[m]
        print(f"{m}: dense {d['dense_mean_ms']:.1f} ms/token (attention {d['dense_cost']['attention_ns'] / 1e6 / 129:.2f} "
              f"per pass, faults {d['dense_cost']['faults']}), expert kernels {d['compute_mean_ms']:.1f} "
              f"(measured compute {d['measured_compute_mean_ms']:.1f}), read window {d['read_window_mean_ms']:.1f} "
              f"(measured stall {d['measured_stall_mean_ms']:.1f}, mgmt {d['measured_mgmt_mean_ms']:.1f}); "
              f"MiB/token {d['read_mib_per_token']:.1f} vs {d['measured_read_mib_per_token']:.1f}; warnings {d['warnings']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("step," + ",".join(f"{m}_measured_ms,{m}_predicted_ms" for m in MODELS) + "\n")
            for i in range(len(result[MODELS[0]]["measured_ms"])):
                cells = []
                for m in MODELS:
                    cells += [f"{result[m]['measured_ms'][i]:.3f}", f"{result[m]['predicted_ms'][i]:.3f}"]
                f.write(f"{i + 1}," + ",".join(cells) + "\n")


if __name__ == "__main__":
    main()
