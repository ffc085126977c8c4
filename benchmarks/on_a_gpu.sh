#!/usr/bin/env bash
# The GPU checks in one go, on a machine with a CUDA GPU and a copy of this checkout:
# the CUDA tests, `devicepipe bench --device cpu,cuda`, the population model on the GPU and how
# far CPU- and GPU-trained detectors score apart (benchmarks/cpu_gpu_agreement.py).
# The bench runs the sections that measure the GPU (stages, handoff, micro, crossover); the
# comparisons with the notebooks and peers are CPU work, measured at one thread on the project's
# own machine (BENCH_ONLY= runs every section).
#
#     OUT=/some/folder bash benchmarks/on_a_gpu.sh
#
# Expects, beside the tracked files (both are git-ignored, made on the machine that sends the tree):
#   .whl/      wheels of the packages the GPU machine lacks (wfdb, dask, sleepecg, ...), installed
#              into /tmp/site without an index; absent: whatever is installed is used
#   .devdata/  a copy of ../shared/data (the tests that read real records, the population model),
#              and .devdata/COMMIT, the commit the tree was copied from (a copy has no .git)
# Writes under $OUT: env.txt, pytest_cuda.{log,xml}, bench.{log,tgz}, population.{log,tgz} (the
# population model and the CPU/GPU agreement), agreement.log.
# Each step has its own time limit, so a slow one does not cost the others' results.
set -u
OUT=${OUT:?set OUT to the folder for the results}
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
        exit 3
fi
export PYTHONPATH="$PWD/src:/tmp/site" PYTHONUNBUFFERED=1 DEVICEPIPE_RUN_SLOW=1
export MPLBACKEND=Agg DEVICEPIPE_DATA="$PWD/.devdata" DEVICEPIPE_REQUIRE_DATA=1
# the benchmarks record the commit the tree was sent from: a .git that came along with the copy
# may be stale, so git is pointed away from it for them (not for the tests, which run git)
measured=(env)
if [ -f .devdata/COMMIT ]; then
    export DEVICEPIPE_SOURCE_COMMIT="$(cat .devdata/COMMIT)"
    measured=(env GIT_DIR=/nonexistent)
fi
{
    date -u +%FT%TZ
    echo "commit ${DEVICEPIPE_SOURCE_COMMIT:-unknown}"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    lscpu | grep -E "^(Model name|CPU\(s\))"
    python3 -c "import torch, numpy, cupy; print('torch', torch.__version__, 'numpy', numpy.__version__, 'cupy', cupy.__version__)"
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

step() { # name, seconds, command...
    local name=$1 limit=$2
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "== $name: exit $? after $((SECONDS - t0)) s"
    tail -n 15 "$OUT/$name.log"
}

step pytest_cuda "${CUDA_TESTS_S:-180}" python3 -m pytest -m cuda -n 8 --dist loadfile -q -p no:cacheprovider \
    --junitxml="$OUT/pytest_cuda.xml"
step bench "${BENCH_S:-240}" "${measured[@]}" python3 -m devicepipe bench --device cpu,cuda --out /tmp/bench \
    ${BENCH_ONLY-"--only" "stages,handoff,micro,crossover"} ${BENCH_SAMPLES:+--samples "$BENCH_SAMPLES"}
tar czf "$OUT/bench.tgz" -C /tmp bench 2>/dev/null
step population "${POPULATION_S:-60}" "${measured[@]}" python3 benchmarks/population_model.py --device cuda --nproc 1 \
    --out /tmp/population/population_model_cuda.json
tar czf "$OUT/population.tgz" -C /tmp population 2>/dev/null
step agreement "${AGREEMENT_S:-120}" "${measured[@]}" python3 benchmarks/cpu_gpu_agreement.py --out /tmp/population/cpu_gpu_agreement.json
tar czf "$OUT/population.tgz" -C /tmp population 2>/dev/null
exit 0
