#!/usr/bin/env bash
# Device call for keys.py: SGLang 0.5.13.post1 as published, then patched by patcher (--site),
# each drafter layout in a fresh process. Carries .gpu-sg (the pack.sh tarball, make_models.py,
# install.sh, py/ with patcher's pure-Python dependencies as wheels).
export PYTHONUNBUFFERED=1
set -o pipefail  # a failed apply stops the script (run 1 went on with the published files)
T=.gpu-sg; B=benchmarks/gpu_sglang; t0=$SECONDS
echo "== install"; . $T/install.sh $T/sglang-0.5.13.post1-py312-sm90.tar.xz || exit 1
python3 $T/make_models.py /tmp/m || exit 1
# PUBLISHED=0 skips the published runs (a call that only re-runs the patched ones).
for layout in $([ "${PUBLISHED:-1}" = 0 ] || echo layers0 midlayer typo); do
  echo "== published $layout t=$((SECONDS-t0))"
  timeout -k 5 150 python3 $B/keys.py /tmp/m/target /tmp/m/drafter --layout $layout 2>&1 | grep -E "KEYS|Error|error" | head -5
done
echo "== patcher apply t=$((SECONDS-t0))"
PYTHONPATH=$(ls $T/py/*.whl | tr '\n' ':').:$PYTHONPATH python3 -m patcher apply --engine sglang --site /tmp/site --no-probes 2>&1 | tail -12 || exit 1
for layout in layers0 typo; do
  echo "== patched $layout t=$((SECONDS-t0))"
  timeout -k 5 150 python3 $B/keys.py /tmp/m/target /tmp/m/drafter --layout $layout 2>&1 | grep -E "KEYS|Error|error" | head -5
done
echo "== done t=$((SECONDS-t0))"
