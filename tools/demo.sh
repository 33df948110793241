#!/usr/bin/env bash
# Colibri demo: builds the `colibri` binary (default preset) and walks through
# the trace tools on the bundled sample, a real Qwen3-30B-A3B routing trace,
# the engine on a small synthetic model, and a replay on modelled machines;
# the runs land in the run store (./colibri-runs.db, or $COLIBRI_DB), and the
# demo ends with a comparison of them, a CI gate and an HTML report.
# Idempotent; needs no GPU and no network once the Debian packages are there.
#
# To extend it, write a demo_* function below and add it to DEMOS.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
colibri=build/default/colibri
sample=traces/samples/qwen3-bigmoe.ctrace
shared_csv=../shared/data/bigmoe-route-traces/qwen.route.csv
tmp=$(mktemp -d "${TMPDIR:-/tmp}/colibri-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# show TITLE COMMAND...: prints a heading and the command, then runs it.
show() {
  local title=$1; shift
  printf '\n== %s\n$ %s\n' "$title" "$*"
  "$@"
}

build() {
  tools/install-deps.sh
  local cuda_args=()
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if command -v nvcc >/dev/null 2>&1; then
    cuda_args=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  echo "== Building colibri (preset default)"
  cmake --preset default "${cuda_args[@]}" >"$tmp/configure.log" || { cat "$tmp/configure.log"; return 1; }
  cmake --build --preset default --target colibri -j 2
}

demo_attribution() {
  printf '\n== Sample trace\n'
  if [ -f traces/samples/README.md ]; then
    grep -m1 -i 'recorded by' traces/samples/README.md || true
  fi
}

demo_inspect() {
  show "Inspect the sample trace (header, shape, provenance)" "$colibri" trace inspect "$sample"
}

demo_reimport() {
  if [ ! -f "$shared_csv" ]; then
    printf '\n== Re-import skipped: %s not found\n' "$shared_csv"
    return 0
  fi
  show "Re-import the original BigMoeOnEdge CSV" \
    "$colibri" trace import --format bmoe-csv "$shared_csv" -o "$tmp/qwen3.ctrace"
}

demo_stats() {
  show "Routing statistics of the sample" "$colibri" trace stats "$sample"
}

demo_engine() {
  show "Synthesize a small MoE model (4 layers x 16 experts, top-2, bf16)" \
    "$colibri" model synth --layers 4 --experts 16 --top-k 2 --hidden 512 --intermediate 256 -o "$tmp/model"
  show "Run the engine on it: 4 requests, 16-token prompts, 16 decode steps, 32 MiB L2 (half the experts), routing recorded" \
    "$colibri" run --model "$tmp/model" --requests 4 --prefill 16 --tokens 16 --l2-bytes 32M --record "$tmp/run.ctrace"
  show "Statistics of the routing the engine recorded" "$colibri" trace stats "$tmp/run.ctrace"
}

demo_calibrate() {
  show "Measure this machine (storage, the CPU kernels at the model's shape, the engine's own work; --quick)" \
    "$colibri" calibrate --quick --model "$tmp/model" --dir "$tmp" -o "$tmp/profile"
  local measured
  measured=$(basename "$(ls "$tmp"/profile/measured-*.json | grep -v -- '-nvme\|-host\|-cpu' | head -1)" .json)
  show "Replay the engine's recording on the measured profile and on the published cpu-local, beside each other" \
    "$colibri" replay "$tmp/run.ctrace" --l2-bytes 32M --hw-file "$tmp"/profile/*.json --hw "$measured" --hw cpu-local
}

demo_replay() {
  show "Replay the sample on three modelled machines (8 GiB L1 in device memory, 8 GiB L2 in host memory; the trace records no hidden size: Qwen3-30B-A3B's 2048)" \
    "$colibri" replay "$sample" --hidden 2048 --l1-bytes 8G --l2-bytes 8G --hw h100-p5800x-gen5 --hw a100-pm9a3-gen4 --hw phone-bigmoe
  closed_loop_ids=$("$colibri" runs list --json | python3 -c 'import json,sys; print(" ".join(str(r["run_id"]) for r in json.load(sys.stdin)["runs"][:3][::-1]))')
  local azure=../shared/data/azure-llm-2023/AzureLLMInferenceTrace_conv.csv
  if [[ -f $azure ]]; then
    show "Open loop: the sample's request arriving at the first 64 times of Azure's conversation trace, continuous batching" \
      "$colibri" replay "$sample" --hidden 2048 --l1-bytes 8G --l2-bytes 8G --hw h100-p5800x-gen5 --hw a100-pm9a3-gen4 --hw phone-bigmoe \
      --arrivals "$azure" --repeat --max-arrivals 64 --jobs 2
  fi
}

demo_report() {
  read -r h100 a100 phone <<<"$closed_loop_ids"
  show "Compare the stored closed-loop runs (baseline: the H100 machine; * marks the best)" \
    "$colibri" report compare "$h100" "$a100" "$phone"
  show "CI gate: may the A100 machine's request P99 be at most 25% above the H100's, with identical routing?" \
    "$colibri" report gate --baseline "$h100" --candidate "$a100" --max-p99-regression 25 --require-identical-routing
  show "HTML report (latency CDFs, expert-load heat maps, hit rate over time)" \
    "$colibri" report compare "$h100" "$a100" "$phone" --format html -o "$root/build/colibri-report.html"
  printf 'Open %s in a browser. Stored runs: %s runs list\n' "$root/build/colibri-report.html" "$colibri"
}

DEMOS=(demo_attribution demo_inspect demo_reimport demo_stats demo_engine demo_calibrate demo_replay demo_report)

build
for demo in "${DEMOS[@]}"; do
  "$demo"
done
printf '\n== Demo done (%ss). More: %s --help, and README.md\n' "$SECONDS" "$colibri"
