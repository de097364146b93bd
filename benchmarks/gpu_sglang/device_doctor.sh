#!/usr/bin/env bash
# Device call for benchmarks/gpu_doctor.py on SGLang 0.5.13.post1 (issue 56): doctor's verdict on each
# line of the grid, then the engine on the same line. STATE=published (default) runs on the published
# files; STATE=patched first runs 'patcher apply --site /tmp/site'; STATE=both runs the published grid,
# applies, then the patched one (PATCHED_ONLY: its rows, ';'-separated). Carries .gpu-sg (the toolkit's tarball,
# make_models.py, install.sh, and py/ with patcher's pure-Python dependencies as wheels).
export PYTHONUNBUFFERED=1
set -o pipefail
T=.gpu-sg; t0=$SECONDS; STATE=${STATE:-published}
if [[ ! -d /tmp/site/sglang || $STATE != patched ]]; then
  echo "== install"; . $T/install.sh $T/sglang-0.5.13.post1-py312-sm90.tar.xz || exit 1
else
  export PYTHONPATH=/tmp/site SGLANG_IS_FLASHINFER_AVAILABLE=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
fi
export PYTHONPATH=$(ls $T/py/*.whl | tr '\n' ':')$PWD:$PYTHONPATH
[[ -f /tmp/m/drafter/config.json ]] || python3 $T/make_models.py /tmp/m || exit 1
# The unpacked tree has no bytecode and doctor's children write none: compile it once, here, on 16
# cores (cold, doctor took 28-92 s per line on this host; vLLM's call of 6 December).
python3 -m compileall -q -j 16 /tmp/site/sglang >/dev/null 2>&1; echo "== compiled t=$((SECONDS-t0))"
nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader
run_grid() {  # STATE ONLY
  echo "== grid $1 t=$((SECONDS-t0))"
  python3 benchmarks/gpu_doctor.py grid sglang $1 /tmp/m $OUT/sglang-$1.json --jobs ${JOBS:-3} \
    --limit ${LIMIT:-220} ${2:+--only "$2"}
}
[[ $STATE == patched ]] || run_grid published "$ONLY"
if [[ $STATE != published ]]; then
  echo "== patcher apply t=$((SECONDS-t0))"
  python3 -m patcher apply --engine sglang --site /tmp/site --no-probes -q 2>&1 | tail -3 || exit 1
  run_grid patched "${PATCHED_ONLY:-$ONLY}"
fi
echo "== done t=$((SECONDS-t0))"
