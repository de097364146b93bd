#!/usr/bin/env bash
# Device call for sglang/eagle3-loud-fc-skip (issue 43): an EAGLE-3 drafter launched with
# --speculative-algorithm EAGLE (not EAGLE3) on SGLang 0.5.13.post1, as published, then patched
# (patcher apply --site). The target captures nothing, so the drafter's fc (3 x hidden in) meets
# one hidden state: published skips fc without a word; patched raises at the first prefill.
# Each run is the toolkit's smoke.py, eager, 2 prompts x 16 tokens, in its own process.
export PYTHONUNBUFFERED=1
set -o pipefail
T=.gpu-sg; t0=$SECONDS
echo "== install"; . $T/install.sh $T/sglang-0.5.13.post1-py312-sm90.tar.xz || exit 1
python3 $T/make_models.py /tmp/m || exit 1
run() {
  timeout -k 5 170 python3 $T/smoke.py /tmp/m/target /tmp/m/drafter --mode eager --prompts 2 --max-new-tokens 16 \
    --extra '{"speculative_algorithm": "EAGLE"}' 2>&1 \
    | grep -E "RESULT|META0|RuntimeError|fc |Error:|AUX " | cut -c1-400 | head -12
}
echo "== published EAGLE t=$((SECONDS-t0))"; run
echo "== patcher apply t=$((SECONDS-t0))"
PYTHONPATH=$(ls $T/py/*.whl | tr '\n' ':').:$PYTHONPATH python3 -m patcher apply --engine sglang --site /tmp/site \
  --no-probes -q 2>&1 | tail -3 || exit 1
echo "== patched EAGLE t=$((SECONDS-t0))"; run
echo "== done t=$((SECONDS-t0))"
