#!/usr/bin/env bash
# gpu-check.sh: the ONE command that checks the worker's CUDA/NCCL path on a GPU machine.
#
#   scripts/gpu-check.sh                 # in the repository root, on the GPU machine
#   scripts/gpu-check.sh --pack-deps     # on a dev machine first, if the GPU image lacks
#                                        # GoogleTest / nlohmann-json (see below)
#
# What it does: checks the tools (cmake >= 3.25, a C++20 g++, nvcc, nlohmann_json, GoogleTest,
# NCCL, a GPU) and says plainly what is missing; configures the worker-only project
# worker/gpu-check (Release, CUDA on; the top-level build needs yaml-cpp, OpenSSL, cpprestsdk,
# which a CUDA image does not have); builds only flotilla-worker, the CUDA/NCCL/memory tests and
# bench_worker_gpu with -j$(nproc); runs `ctest -R "Cuda|RuntimeNccl|Worker|GemmPlan"` and
# bench_worker_gpu, then the CUDA op tests under compute-sanitizer (memcheck, racecheck,
# synccheck; when installed) with what is left of a 9-minute budget; prints a verdict; copies
# the logs and JSON results to "$OUT" when set.
# Without a GPU it still builds and runs, and says that the GPU tests SKIPPED.
#
# The GPU machine has no network, so nothing can be installed there. If the first run says
# GoogleTest or nlohmann_json is MISSING, run `scripts/gpu-check.sh --pack-deps` on a machine
# with Debian's libgtest-dev / nlohmann-json3-dev (this repository's dev machines): it copies
# the googletest sources and the json headers (a few MB) into build-gpu-deps/, which the GPU
# call must carry (device tool: carry ["build-gpu-deps"]). Without GoogleTest the script still
# builds flotilla-worker and runs a shell smoke check (two CUDA runs byte-compared, a PP 2 -> 1
# rescale) plus the benchmark.
#
# Environment: FLOTILLA_GPU_BUILD_DIR (default build-gpu-check), FLOTILLA_GPU_DEPS (default
# build-gpu-deps), FLOTILLA_GPU_CHECK_TESTS=all (run every worker test, not only the GPU ones),
# FLOTILLA_GPU_CHECK_NO_BENCH=1, FLOTILLA_GPU_CHECK_NO_SANITIZER=1,
# FLOTILLA_GPU_CHECK_SIMULATE_BARE=1 (ignore the system's GoogleTest and nlohmann_json),
# FLOTILLA_GPU_CHECK_BUDGET_S (default 540: the benchmark and the sanitizer passes get what
# is left of it, so the whole run ends inside the device tool's 10-minute limit).
# Exit: 0 all ran and passed (GPU tests may have skipped: read the verdict), 1 a build or test
# failure, 3 a missing tool.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${FLOTILLA_GPU_BUILD_DIR:-$ROOT/build-gpu-check}"
DEPS="${FLOTILLA_GPU_DEPS:-$ROOT/build-gpu-deps}"

if [ "${1:-}" = "--pack-deps" ]; then
  set -e
  json_dir=/usr/include/nlohmann
  gtest_src=/usr/src/googletest
  [ -f "$json_dir/json.hpp" ] || { echo "gpu-check --pack-deps: $json_dir/json.hpp missing (apt-get install nlohmann-json3-dev)" >&2; exit 3; }
  [ -f "$gtest_src/CMakeLists.txt" ] || { echo "gpu-check --pack-deps: $gtest_src missing (apt-get install googletest)" >&2; exit 3; }
  rm -rf "$DEPS"
  mkdir -p "$DEPS/include"
  cp -r "$json_dir" "$DEPS/include/"
  cp -r "$gtest_src" "$DEPS/googletest"
  echo "gpu-check --pack-deps: wrote $DEPS ($(du -sh "$DEPS" | cut -f1)): nlohmann_json headers and the googletest sources."
  echo "Carry it to the GPU machine (it is git-ignored): device run with carry [\"$(basename "$DEPS")\"], command scripts/gpu-check.sh"
  exit 0
fi
if [ $# -gt 0 ]; then
  echo "usage: scripts/gpu-check.sh [--pack-deps]" >&2
  exit 2
fi

LOGS="$BUILD/gpu-check-logs"
mkdir -p "$LOGS"
MAIN_LOG="$LOGS/gpu-check.log"
: >"$MAIN_LOG"
say() { echo "gpu-check: $*" | tee -a "$MAIN_LOG"; }
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
# The device tool stops a command at 10 minutes: later phases get what is left of the budget.
BUDGET=${FLOTILLA_GPU_CHECK_BUDGET_S:-540}
cap() {  # cap SECONDS -> min(SECONDS, budget left - 15), at least 0
  local left=$(( BUDGET - $(elapsed) - 15 ))
  [ "$left" -lt 0 ] && left=0
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

finish() {  # $1 exit code; copies what is there to $OUT (at most 8 files come back)
  local code=$1
  say "total ${SECONDS_BUILD:-?} s build, $(elapsed) s overall; exit $code"
  if [ -n "${OUT:-}" ] && [ -d "${OUT}" ]; then
    for f in gpu-check.log summary.json ctest.log ctest-junit.xml sanitizer.log bench_worker_gpu.txt bench_worker_gpu.json build.log; do
      [ -f "$LOGS/$f" ] && cp "$LOGS/$f" "$OUT/" 2>/dev/null
    done
    # at most 8 files come back: drop the build log when everything else is there
    [ "$(ls "$OUT" | wc -l)" -gt 8 ] && rm -f "$OUT/build.log"
    say "copied logs and results to \$OUT ($OUT)"
  fi
  exit "$code"
}

# ---------------------------------------------------------------- tools and dependencies
say "repository $ROOT, build dir $BUILD, $(nproc) cores, $(date -u +%FT%TZ)"
missing=()
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

if command -v cmake >/dev/null; then
  cmake_version=$(cmake --version | head -1 | awk '{print $3}')
  version_ge "$cmake_version" 3.25 || missing+=("cmake >= 3.25 (found $cmake_version)")
  say "cmake $cmake_version"
else
  missing+=("cmake >= 3.25")
fi
CXX_BIN="${CXX:-}"
[ -z "$CXX_BIN" ] && for c in g++ c++ clang++; do command -v $c >/dev/null && { CXX_BIN=$c; break; }; done
if [ -n "$CXX_BIN" ] && echo 'int main(){ auto f = [](auto x) requires true { return x; }; return f(0); }' |
    "$CXX_BIN" -std=c++20 -x c++ - -o /dev/null 2>/dev/null; then
  say "C++ compiler $($CXX_BIN --version | head -1)"
else
  missing+=("a C++20 compiler (g++ >= 10; found '${CXX_BIN:-none}')")
fi
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -n "$NVCC" ]; then
  say "nvcc $NVCC: $("$NVCC" --version | grep -o 'release [0-9.]*')"
else
  say "WARNING: nvcc not found: the CUDA backend cannot be built; the CPU-only worker is built and every GPU test will SKIP"
fi

# FLOTILLA_GPU_CHECK_SIMULATE_BARE=1 ignores the system's GoogleTest and nlohmann_json, as on a
# CUDA image without Debian's packages (to test --pack-deps and the fallback on a dev machine).
bare="${FLOTILLA_GPU_CHECK_SIMULATE_BARE:-}"
sys_inc=(/usr/include /usr/local/include)
[ -n "$bare" ] && sys_inc=() && say "simulating a bare image: system GoogleTest and nlohmann_json ignored"
have_json=no
for d in "${sys_inc[@]}" "$DEPS/include"; do [ -f "$d/nlohmann/json.hpp" ] && { have_json="$d"; break; }; done
[ "$have_json" = no ] && missing+=("nlohmann_json headers (Debian nlohmann-json3-dev): run scripts/gpu-check.sh --pack-deps on a dev machine and carry build-gpu-deps")
say "nlohmann_json: $have_json"

have_gtest=no
if [ -z "$bare" ] && { [ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ]; }; then
  for f in /usr/lib/*/libgtest.* /usr/lib/libgtest.* /usr/lib64/libgtest.* /usr/local/lib/libgtest.* /usr/local/lib64/libgtest.*; do
    [ -e "$f" ] && { have_gtest="installed ($f)"; break; }
  done
fi
[ "$have_gtest" = no ] && [ -f "$DEPS/googletest/CMakeLists.txt" ] && have_gtest="sources in $DEPS/googletest"
say "GoogleTest: $have_gtest"

nccl_flags=()
nccl_where=""
for d in /usr/include /usr/local/cuda/include ${CUDA_HOME:+$CUDA_HOME/include}; do [ -f "$d/nccl.h" ] && { nccl_where="$d (system)"; break; }; done
if [ -z "$nccl_where" ] && command -v python3 >/dev/null; then
  # pip's nvidia-nccl-cu* wheel (PyTorch images): header and libnccl.so.2 live in site-packages
  pydir=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0] if s else "")' 2>/dev/null || true)
  if [ -n "$pydir" ] && [ -f "$pydir/include/nccl.h" ] && [ -f "$pydir/lib/libnccl.so.2" ]; then
    nccl_where="$pydir (python wheel)"
    nccl_flags=(-DFLOTILLA_NCCL_INCLUDE_DIR="$pydir/include" -DFLOTILLA_NCCL_LIBRARY="$pydir/lib/libnccl.so.2")
  fi
fi
say "NCCL: ${nccl_where:-not found (the RuntimeNccl tests will say this build has no NCCL; --comm tcp still works)}"

gpus=0
if command -v nvidia-smi >/dev/null; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  nvidia-smi -L 2>/dev/null | sed 's/^/gpu-check: /' | tee -a "$MAIN_LOG"
  nvidia-smi --query-gpu=driver_version,memory.total,compute_mode --format=csv,noheader 2>/dev/null | sed 's/^/gpu-check: driver, memory, compute mode: /' | tee -a "$MAIN_LOG"
fi
if [ "$gpus" -eq 0 ]; then
  say "NO GPU visible (nvidia-smi): the GPU tests and the benchmark will SKIP; this run only proves the build and the CPU-side checks"
else
  say "$gpus GPU(s) visible; NCCL tests that need 2 GPUs skip with a line saying so when there is 1"
fi

if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do say "MISSING: $m"; done
  [ "$have_gtest" = no ] && say "MISSING too (needed for the test suites, not for the build): GoogleTest (Debian libgtest-dev); --pack-deps carries it"
  say "cannot build: install or carry what is MISSING above (the GPU machine has no network)"
  finish 3
fi

tests_on=ON
if [ "$have_gtest" = no ]; then
  tests_on=OFF
  say "MISSING: GoogleTest (Debian libgtest-dev): the gtest suites cannot be built. Falling back to a shell smoke check."
  say "  For the full check run scripts/gpu-check.sh --pack-deps on a dev machine and carry build-gpu-deps."
fi

# ---------------------------------------------------------------- configure and build
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$BUILD/CMakeCache.txt" ] && gen=()  # keep the generator of an existing build dir
cuda_flags=(-DFLOTILLA_CUDA=ON)
[ -n "$bare" ] && cuda_flags+=(-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
[ -n "$NVCC" ] && cuda_flags+=(-DCMAKE_CUDA_COMPILER="$NVCC")
say "configuring (Release, CUDA on, tests $tests_on)"
if ! cmake -S "$ROOT/worker/gpu-check" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$CXX_BIN" "${cuda_flags[@]}" "${nccl_flags[@]}" \
    -DFLOTILLA_DEPS_DIR="$DEPS" -DFLOTILLA_GPU_CHECK_TESTS=$tests_on >"$LOGS/build.log" 2>&1; then
  tail -30 "$LOGS/build.log" | tee -a "$MAIN_LOG"
  say "FAILED: cmake configure (full log: build.log)"
  finish 1
fi
grep -E "flotilla (worker|gpu-check)" "$LOGS/build.log" | sed 's/^-- /gpu-check: cmake: /' | tee -a "$MAIN_LOG"

targets=(flotilla-worker)
[ -n "$NVCC" ] && targets+=(bench_worker_gpu)
if [ $tests_on = ON ]; then
  targets+=(worker_cuda_runtime_test worker_runtime_nccl_test worker_memory_errors_test
            worker_cuda_gemm_plan_test worker_cuda_token_groups_test)
  [ -n "$NVCC" ] && targets+=(worker_cuda_ops_test)
  [ "${FLOTILLA_GPU_CHECK_TESTS:-}" = all ] && targets+=(worker_ops_gradcheck_test worker_model_test
            worker_runtime_pieces_test worker_consistency_test worker_kill_test worker_checkpoint_test)
fi
say "building ${targets[*]} with -j$(nproc)"
tb=$(date +%s)
if ! cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >>"$LOGS/build.log" 2>&1; then
  grep -E "error|Error" "$LOGS/build.log" | head -30 | tee -a "$MAIN_LOG"
  say "FAILED: build (full log: build.log)"
  SECONDS_BUILD=$(( $(date +%s) - tb ))
  finish 1
fi
SECONDS_BUILD=$(( $(date +%s) - tb ))
say "build OK in ${SECONDS_BUILD} s"

failures=0
summary_tests='null'
# ---------------------------------------------------------------- tests
if [ $tests_on = ON ]; then
  regex='Cuda|RuntimeNccl|Worker|GemmPlan'
  [ "${FLOTILLA_GPU_CHECK_TESTS:-}" = all ] && regex='.'
  say "ctest -R \"$regex\" (one GPU is shared by every rank of a job)"
  # --timeout per test (a hung rank is a failure, not a stalled session); the whole ctest run
  # gets at most 6 minutes of the budget.
  timeout "$(cap 360)" ctest --test-dir "$BUILD" -R "$regex" -E '_NOT_BUILT' --output-on-failure -j 4 \
      --timeout 150 --output-junit "$LOGS/ctest-junit.xml" >"$LOGS/ctest.log" 2>&1
  ctest_rc=$?
  [ $ctest_rc -eq 124 ] && say "FAILED: ctest stopped at the time budget (a hang?); see ctest.log"
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Exception|Timeout|Not Run" "$LOGS/ctest.log" | sed 's/^/gpu-check: ctest: /' | tee -a "$MAIN_LOG"
  skipped=$(grep -c '\*\*\*Skipped' "$LOGS/ctest.log" || true)
  failed=$(grep -cE '\*\*\*Failed|\*\*\*Timeout|Not Run|\*\*\*Exception' "$LOGS/ctest.log" || true)
  total=$(grep -oE 'out of [0-9]+' "$LOGS/ctest.log" | tail -1 | awk '{print $3}')
  if [ "$skipped" -gt 0 ]; then
    # why they skipped, once per reason (GTEST_SKIP messages in ctest's log)
    grep -hE "skipped: |needs [0-9]+ CUDA GPUs|has no (CUDA|NCCL)" "$BUILD/Testing/Temporary/LastTest"*.log 2>/dev/null |
      sed 's/^.*Skipped *//' | sort | uniq -c |
      sed -E 's/^ *([0-9]+) (.*)$/gpu-check: SKIPPED (\1 tests): \2/' | tee -a "$MAIN_LOG"
  fi
  [ $ctest_rc -ne 0 ] && failures=$((failures + 1))
  summary_tests="{\"total\": ${total:-0}, \"failed\": $failed, \"skipped\": $skipped, \"ctest_exit\": $ctest_rc}"
fi

# ---------------------------------------------------------------- shell smoke (no GoogleTest)
smoke='null'
if [ $tests_on = OFF ] && [ "$gpus" -gt 0 ] && [ -n "$NVCC" ]; then
  say "smoke: CUDA PP 2 (2 ranks on GPU 0, --comm auto) twice, then PP 2 -> 1 against uninterrupted PP 1"
  S="$BUILD/smoke"; rm -rf "$S"; mkdir -p "$S"
  head -c 200000 "$ROOT/README.md" "$ROOT"/docs/*.md >"$S/corpus.txt"
  W="$BUILD/worker/flotilla-worker"
  job() { FLOTILLA_VISIBLE_GPUS=0 "$W" run --model small --backend cuda --data "$S/corpus.txt" \
            --checkpoint-every 3 --checkpoint-dir "$S/ck_$1" --loss-log "$S/loss_$1.txt" \
            --progress "$S/progress_$1.jsonl" "${@:2}" >>"$LOGS/ctest.log" 2>&1; }
  ok=true
  job a --pp 2 --steps 6 && job b --pp 2 --steps 6 || ok=false
  $ok && cmp -s "$S/loss_a.txt" "$S/loss_b.txt" && say "smoke: PASS two CUDA runs byte-identical" || { say "smoke: FAIL two CUDA runs differ or failed"; ok=false; }
  grep -q '"comm":"tcp"' "$S/progress_a.jsonl" && say "smoke: PASS --comm auto picked tcp on one GPU" || { say "smoke: FAIL comm"; ok=false; }
  job base --pp 1 --steps 6 && job el --pp 2 --steps 3 && job el --pp 1 --steps 6 || ok=false
  cmp -s "$S/loss_base.txt" "$S/loss_el.txt" && say "smoke: PASS PP 2 -> 1 rescale bit-identical on the GPU" || { say "smoke: FAIL PP rescale differs or failed"; ok=false; }
  $ok || failures=$((failures + 1))
  smoke=$($ok && echo '"pass"' || echo '"fail"')
fi

# ---------------------------------------------------------------- benchmark
bench='null'
if [ -n "$NVCC" ] && [ -z "${FLOTILLA_GPU_CHECK_NO_BENCH:-}" ]; then
  say "bench_worker_gpu (gpt-125m, FP32 and TF32 GEMMs)"
  if [ "$(cap 240)" -lt 30 ]; then
    say "bench_worker_gpu not run: less than 30 s left of the ${BUDGET} s budget"
  elif timeout "$(cap 240)" "$BUILD/bench/worker_gpu/bench_worker_gpu" --json "$LOGS/bench_worker_gpu.json" >"$LOGS/bench_worker_gpu.txt" 2>&1; then
    sed 's/^/gpu-check: bench: /' "$LOGS/bench_worker_gpu.txt" | grep -E "SKIPPED|ms/step|MFU|ratio|on " | tee -a "$MAIN_LOG"
    if grep -q SKIPPED "$LOGS/bench_worker_gpu.txt"; then bench='"skipped"'; else bench='"ok"'; fi
  else
    bench_rc=$?
    tail -5 "$LOGS/bench_worker_gpu.txt" | tee -a "$MAIN_LOG"
    [ $bench_rc -eq 124 ] && say "bench_worker_gpu TIMED OUT at the budget (slow, or hung)"
    say "FAILED: bench_worker_gpu (see bench_worker_gpu.txt)"
    failures=$((failures + 1))
    bench='"fail"'
  fi
fi

# ---------------------------------------------------------------- compute-sanitizer
sanitizer='null'
SAN=$(command -v compute-sanitizer || true)
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer
if [ $tests_on = ON ] && [ "$gpus" -gt 0 ] && [ -n "$SAN" ] && [ -z "${FLOTILLA_GPU_CHECK_NO_SANITIZER:-}" ]; then
  ops="$BUILD/tests/worker/worker_cuda_ops_test"
  : >"$LOGS/sanitizer.log"
  san_ok=true
  for spec in "memcheck:CudaOps.*:CudaModel.*:-CudaOps.ColumnSumsPastTheGridYLimit" \
              "racecheck:CudaOps.CrossEntropy:CudaOps.SumSquaresAndAdamW:CudaOps.LayerNorm:CudaOps.Attention" \
              "synccheck:CudaOps.CrossEntropy:CudaOps.SumSquaresAndAdamW"; do
    tool=${spec%%:*}; filter=${spec#*:}
    t=$(cap 150)
    if [ "$t" -lt 20 ]; then say "compute-sanitizer $tool not run: the ${BUDGET} s budget is spent"; continue; fi
    say "compute-sanitizer --tool $tool on $filter (at most $t s)"
    if ! timeout "$t" "$SAN" --tool "$tool" --error-exitcode 99 "$ops" --gtest_filter="$filter" >>"$LOGS/sanitizer.log" 2>&1; then
      san_ok=false
      say "FAILED: compute-sanitizer $tool (see sanitizer.log)"
    fi
  done
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|error" "$LOGS/sanitizer.log" | sort | uniq -c | head -10 | sed 's/^/gpu-check: sanitizer: /' | tee -a "$MAIN_LOG"
  $san_ok || failures=$((failures + 1))
  sanitizer=$($san_ok && echo '"pass"' || echo '"fail"')
elif [ "$gpus" -gt 0 ] && [ -z "$SAN" ]; then
  say "compute-sanitizer not found: memcheck/racecheck not run"
fi

# ---------------------------------------------------------------- verdict
if [ "$failures" -gt 0 ]; then verdict="FAIL"
elif [ "$gpus" -eq 0 ] || [ -z "$NVCC" ]; then verdict="PASS on CPU only: GPU TESTS SKIPPED (no GPU visible or no nvcc), nothing GPU-side was verified"
elif [ $tests_on = OFF ]; then verdict="PARTIAL: GoogleTest missing, only the smoke check and the benchmark ran"
else verdict="PASS on $gpus GPU(s)"
fi
cat >"$LOGS/summary.json" <<EOF
{"verdict": "$verdict", "gpus": $gpus, "nvcc": "$( [ -n "$NVCC" ] && echo yes || echo no)", "nccl": "${nccl_where:-none}",
 "build_seconds": $SECONDS_BUILD, "overall_seconds": $(elapsed), "tests": $summary_tests,
 "smoke": $smoke, "sanitizer": $sanitizer, "bench": $bench}
EOF
say "VERDICT: $verdict"
[ "$failures" -gt 0 ] && finish 1
finish 0
