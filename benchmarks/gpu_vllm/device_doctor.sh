#!/usr/bin/env bash
# Device call for benchmarks/gpu_doctor.py on vLLM 0.22.1 (issue 56): doctor's verdict on each line of
# the grid, then the engine on the same line. STATE=patched first runs 'patcher apply --site /tmp/site'.
# Carries .gpu (the shared gpu-vllm toolkit's tarball, install.sh, make_models.py) and .gpu-sg/py
# (patcher's pure-Python dependencies as wheels).
export PYTHONUNBUFFERED=1
set -o pipefail
T=.gpu; t0=$SECONDS; STATE=${STATE:-published}
echo "== install"; . $T/install.sh $T/vllm-0.22.1-py312-sm90.tar.xz || exit 1
export PYTHONPATH=$(ls .gpu-sg/py/*.whl | tr '\n' ':')$PWD:$PYTHONPATH VLLM_ALLOW_INSECURE_SERIALIZATION=1
[[ -f /tmp/m/drafter/config.json ]] || python3 $T/make_models.py /tmp/m || exit 1
nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader
if [[ $STATE == patched ]]; then
  echo "== patcher apply t=$((SECONDS-t0))"
  python3 -m patcher apply --engine vllm --site /tmp/site --no-probes -q 2>&1 | tail -3 || exit 1
fi
echo "== grid $STATE t=$((SECONDS-t0))"
python3 benchmarks/gpu_doctor.py grid vllm $STATE /tmp/m $OUT/vllm-$STATE.json --jobs ${JOBS:-2} \
  --limit ${LIMIT:-240} ${ONLY:+--only "$ONLY"}
echo "== done t=$((SECONDS-t0))"
