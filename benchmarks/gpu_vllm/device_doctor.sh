#!/usr/bin/env bash
# Device call for benchmarks/gpu_doctor.py on vLLM 0.22.1 (issue 56): doctor's verdict on each line of
# the grid, then the engine on the same line. STATE=patched first runs 'patcher apply --site /tmp/site';
# STATE=both runs the published grid, applies, then the patched one (each grid's JSON is written when it ends);
# ONLY / PATCHED_ONLY: row names, ';'-separated.
# Carries .gpu (the shared gpu-vllm toolkit's tarball, install.sh, make_models.py) and .gpu-sg/py
# (patcher's pure-Python dependencies as wheels).
export PYTHONUNBUFFERED=1
set -o pipefail
T=.gpu; t0=$SECONDS; STATE=${STATE:-published}
echo "== install"; . $T/install.sh $T/vllm-0.22.1-py312-sm90.tar.xz || exit 1
# stubs/: the API server's dependencies the toolkit does not carry, which `vllm serve`'s parser imports.
export PYTHONPATH=$PWD/benchmarks/gpu_vllm/stubs:$(ls .gpu-sg/py/*.whl | tr '\n' ':')$PWD:$PYTHONPATH VLLM_ALLOW_INSECURE_SERIALIZATION=1
# Its own folder (a warm machine may hold SGLang's models in /tmp/m); ids that do not start at 1, which a
# non-speculators config would make ambiguous (SpecForge's numbering, read as i + 1: facts.trained_layers).
M=/tmp/mv; [[ -f $M/drafter/config.json ]] || python3 $T/make_models.py $M --aux-layers 2,3,6 || exit 1
nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader
run_grid() {  # STATE ONLY
  echo "== grid $1 t=$((SECONDS-t0))"
  python3 benchmarks/gpu_doctor.py grid vllm $1 $M $OUT/vllm-$1.json --jobs ${JOBS:-2} \
    --engine-jobs ${ENGINE_JOBS:-1} --limit ${LIMIT:-240} ${2:+--only "$2"}
}
[[ $STATE == patched ]] || run_grid published "$ONLY"
if [[ $STATE != published ]]; then
  echo "== patcher apply t=$((SECONDS-t0))"
  python3 -m patcher apply --engine vllm --site /tmp/site --no-probes -q 2>&1 | tail -3 || exit 1
  run_grid patched "${PATCHED_ONLY:-$ONLY}"
fi
echo "== done t=$((SECONDS-t0))"
