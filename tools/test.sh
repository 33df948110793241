#!/usr/bin/env bash
# Builds Colibri and runs every test: the `default` preset (gcc, RelWithDebInfo,
# CUDA when nvcc is found) and its ctest, then the `asan` preset (clang,
# ASan+UBSan, libFuzzer targets) and its ctest, then each fuzzer for a bounded
# time on a copy of its seed corpus. Prints a summary; exits non-zero when any
# step fails. Idempotent: re-running reuses the build dirs and ccache.
#
#   tools/test.sh           everything (what CI runs: .ci/run)
#   tools/test.sh --quick   default preset build + ctest only
#
# Environment: COLIBRI_FUZZ_SECONDS (default 30) per fuzzer; CCACHE_DIR as usual.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
fuzz_seconds=${COLIBRI_FUZZ_SECONDS:-30}
jobs=2  # the CI machine has 2 cores; more only thrashes

summary=()
failed=0
# step NAME COMMAND...: runs and times one step, recording the outcome.
step() {
  local name=$1; shift
  local start=$SECONDS
  echo
  echo "=== $name"
  if "$@"; then
    summary+=("$(printf 'ok    %5ss  %s' $((SECONDS - start)) "$name")")
    return 0
  fi
  summary+=("$(printf 'FAIL  %5ss  %s' $((SECONDS - start)) "$name")")
  failed=1
  return 1
}
skip() {
  summary+=("$(printf 'skip  %5s   %s' '' "$1")")
}

print_summary() {
  echo
  echo "=== summary (${SECONDS}s in all)"
  printf '%s\n' "${summary[@]}"
  if [ $failed -ne 0 ]; then echo "RESULT: FAILED"; else echo "RESULT: all passed"; fi
}

if ! step "install dependencies" tools/install-deps.sh; then
  print_summary
  exit 1
fi

# nvcc is often installed off PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cuda_args=()
if command -v nvcc >/dev/null 2>&1; then
  cuda_args=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)" -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  echo "CUDA: $(command -v nvcc)"
else
  echo "CUDA: nvcc not found, CUDA targets not built"
fi

ccache -M 5G >/dev/null

# run_preset NAME EXTRA_CMAKE_ARGS...: configure, build, then ctest. Returns
# non-zero only when the build failed (ctest failures are recorded, and the
# fuzzers still run on a good asan build).
run_preset() {
  local preset=$1; shift
  step "$preset: configure" cmake --preset "$preset" "$@" &&
    step "$preset: build" cmake --build --preset "$preset" -j "$jobs" || return 1
  step "$preset: ctest" ctest --preset "$preset" -j "$jobs" --output-on-failure || true
}

# fuzz_one BINARY: one fuzzer for $fuzz_seconds on a temp copy of its seed corpus, so
# the repository is not modified. Crash inputs land in build/asan/fuzz-artifacts/.
fuzz_one() {
  local bin=$1 name work log rc
  name=$(basename "$bin")
  work=$(mktemp -d "${TMPDIR:-/tmp}/colibri-fuzz-$name.XXXXXX")
  mkdir -p "$work/corpus" "$root/build/asan/fuzz-artifacts/$name"
  if [ -d "tests/fuzz/corpus/$name" ]; then cp -r "tests/fuzz/corpus/$name/." "$work/corpus/"; fi
  log="$root/build/asan/fuzz-artifacts/$name.log"
  "$bin" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$root/build/asan/fuzz-artifacts/$name/" "$work/corpus" >"$log" 2>&1
  rc=$?
  rm -rf "$work"
  grep -E '^(Done|stat::(number_of_executed_units|new_units_added|peak_rss_mb))' "$log" | tr '\n' ' '
  echo
  if [ $rc -ne 0 ]; then
    echo "$name: exit $rc; last lines of $log:"
    tail -n 60 "$log"
  fi
  return $rc
}

run_preset default "${cuda_args[@]}"
if [ $quick -eq 0 ]; then
  if run_preset asan; then
    fuzzers=$(find build/asan/tests/fuzz -maxdepth 1 -type f -name '*_fuzz' -perm -u+x 2>/dev/null | sort)
    if [ -z "$fuzzers" ]; then
      step "fuzz: no fuzzers found in build/asan/tests/fuzz" false
    fi
    for bin in $fuzzers; do
      step "fuzz: $(basename "$bin") ${fuzz_seconds}s" fuzz_one "$bin"
    done
  fi
else
  skip "asan preset and fuzzing (--quick)"
fi

print_summary
exit $failed
