"""``drafter check``: compare a drafter's config and tensor headers with the target and
with what the chosen engine release will do with them.

Each check returns findings; none raises for a wrong-but-readable drafter. The checks
target the failures that cost a full server load and produce no error: keys skipped by
the loader, an ``fc`` that gets other features than it was trained on, a vocabulary map
that is missing, a launch flag that runs EAGLE-3 as EAGLE-1.
"""

from __future__ import annotations

from . import facts
from .checkpoint import Checkpoint
from .configs import SPECULATORS, DrafterConfig, TargetConfig
from .findings import Finding, hint, ok, problem
from .key_names import MODEL_PREFIX, decoder_key, is_known, scheme_of, strip_model
from .launch_flags import check_flags, guess_engine
from .release import Release
from .release_checks import (
    MLA_DRAFTERS,
    check_aux_capture,
    check_drafter_class,
    check_setup,
    check_target_class,
    check_use_aux,
)

DEFAULT_AUX_LAYERS = 3
_TORCH_DTYPES = {"bfloat16": "BF16", "float16": "F16", "half": "F16", "float32": "F32", "float": "F32"}


def check_drafter(ckpt: Checkpoint, drafter: DrafterConfig, target: TargetConfig | None,
                  engine: Release | None, flags: str | None) -> list[Finding]:
    findings = check_setup(engine) if engine is not None else []
    findings += check_target_class(engine, target) if engine is not None else []
    findings += _check_config_format(drafter, engine)
    if any(a in MLA_DRAFTERS for a in drafter.architectures):
        findings.append(hint("architecture.mla", "an MLA EAGLE-3 drafter: the key and shape checks here are for "
                             "Llama drafters and were skipped"))
        return findings
    findings += _check_decoder_keys(ckpt, engine)
    findings += _check_unknown_keys(ckpt, engine)
    findings += _check_fc(ckpt, drafter, target)
    findings += check_aux_capture(drafter, target, engine)
    findings += _check_vocab(ckpt, drafter, target)
    findings += _check_attention(ckpt, drafter, target)
    findings += _check_context(drafter, target)
    findings += _check_dtype(ckpt, drafter)
    if target is None:
        findings.append(hint("target.missing", "no --target: checked against the drafter's own config only",
                             hint="pass --target KIMI_FOLDER to check aux layer ids, hidden size and vocab"))
    if flags is not None:
        flag_engine = engine.name if engine is not None else guess_engine(flags)
        if flag_engine is None:
            findings.append(hint("flags.engine", "cannot tell the engine from --flags; pass --engine",
                                 found=flags[:80]))
        else:
            findings += check_flags(flags, flag_engine, ckpt.folder, drafter.format == SPECULATORS)
    return findings


def _fix_command(engine: Release | None) -> str:
    name = engine.name if engine else "sglang"
    if engine is not None and engine.located_by:
        where = engine.located_by
    else:
        where = f" --engine-version {engine.version}" if engine and engine.version else ""
    return f"patcher drafter fix DRAFTER --out NEW --engine {name}{where}"


def _check_config_format(d: DrafterConfig, engine: Release | None) -> list[Finding]:
    if d.format == SPECULATORS:
        if d.speculators_model_type != "eagle3":
            return [problem("config.format", "a speculators config of another algorithm than EAGLE-3",
                            wanted='"speculators_model_type": "eagle3"', found=repr(d.speculators_model_type))]
        if engine is None:
            return [hint("config.format", "speculators-format config: vLLM reads it from 0.10.1.1, SGLang never",
                         hint="pass --engine to check it against your engine")]
        if facts.reads_speculators_config(engine):
            return [ok("config.format", f"speculators-format config, read by {engine.label()}")]
        if engine.name == "vllm" and engine.version is None:
            return [hint("config.format", "speculators-format config: vLLM reads it from 0.10.1.1",
                         hint="pass --engine-version to check your release")]
        why = "SGLang has no reader for it" if engine.name == "sglang" else "vLLM reads it only from 0.10.1.1"
        return [problem("config.format", f"speculators-format config that {engine.label()} cannot read ({why})",
                        wanted='a LlamaForCausalLMEagle3 config ("architectures", Llama fields, "eagle_config")',
                        found='"speculators_model_type": "eagle3"',
                        hint=f"convert it: {_fix_command(engine)}")]
    archs = ", ".join(d.architectures) or "(none)"
    if not d.architectures or not any("Eagle3" in a for a in d.architectures):
        eagle1 = any("Eagle" in a for a in d.architectures)
        what = "an EAGLE-1 drafter, not EAGLE-3" if eagle1 else "not an EAGLE-3 drafter config"
        return [problem("config.format", f"architectures {archs}: {what}",
                        wanted='"architectures": ["LlamaForCausalLMEagle3"]', found=archs)]
    return check_drafter_class(d, engine)


def _check_decoder_keys(ckpt: Checkpoint, engine: Release | None) -> list[Finding]:
    by_scheme: dict[str, list[str]] = {}
    layers: set[int] = set()
    for name in ckpt.tensors:
        dk = decoder_key(name)
        if dk is not None:
            by_scheme.setdefault(scheme_of(dk.prefix), []).append(name)
            layers.add(dk.layer)
    if not by_scheme:
        return [problem("keys.decoder_prefix", "no decoder-layer tensors (neither midlayer.* nor layers.0.*)",
                        wanted="midlayer.* or layers.0.* tensors", found=f"{len(ckpt.tensors)} tensors, none of them")]
    if len(by_scheme) > 1:
        counts = ", ".join(f"{len(v)} {k}*" for k, v in sorted(by_scheme.items()))
        return [problem("keys.decoder_prefix", "decoder-layer tensors under both spellings; one set would be ignored",
                        wanted="one spelling", found=counts)]
    ((scheme, names),) = by_scheme.items()
    found = f"{len(names)} {scheme}* tensors"
    out: list[Finding] = []
    accepted = facts.loader_accepts(engine) if engine is not None else None
    if engine is None or accepted is None:
        out.append(hint("keys.decoder_prefix", f"{found}: vLLM reads both spellings; SGLang <= 0.5.11 reads only "
                        "midlayer.* and skips layers.0.* without a message",
                        hint="pass --engine and --engine-version (or --python / --site) to check your release"))
    elif scheme in accepted:
        via = (f" (with our patch {engine.name}/{facts.KEYS_FAMILY})"
               if facts.accepts_via_our_patch(engine, scheme) else "")
        out.append(ok("keys.decoder_prefix", f"{found}, read by {engine.label()}{via}"))
    else:
        wanted = " or ".join(f"{p}*" for p in sorted(accepted))
        fam = engine.family(facts.KEYS_FAMILY)
        patch = (f"  (or apply {fam.family.id}: {engine.apply_command()})"
                 if fam is not None and fam.state in ("pending", "lost") else "")
        out.append(problem(
            "keys.decoder_prefix",
            f"{engine.label()} skips all {found} without a message: the decoder layer stays "
            "randomly initialised and nothing is accepted",
            wanted=f"{wanted} tensors", found=found, hint=f"convert: {_fix_command(engine)}{patch}"))
    limit = facts.max_decoder_layers(engine) if engine is not None else None
    if engine is not None and limit is not None and len(layers) > limit:
        out.append(problem("keys.decoder_layers", f"{len(layers)} decoder layers; {engine.label()} builds {limit}",
                           wanted=f"{limit} decoder layer", found=f"layers {sorted(layers)}",
                           hint="vLLM >= 0.11.1 or SGLang >= 0.5.12 build multi-layer drafters"))
    if engine is not None and engine.name == "vllm":
        prefixed = [n for n in ckpt.tensors if n.startswith(MODEL_PREFIX)]
        if prefixed:
            out.append(problem("keys.model_prefix", "tensor names start with 'model.': vLLM adds 'model.' again "
                               "and will not find them", wanted="names without 'model.'",
                               found=f"{len(prefixed)} tensors, e.g. {prefixed[0]}"))
    return out


def _check_unknown_keys(ckpt: Checkpoint, engine: Release | None) -> list[Finding]:
    unknown = sorted(n for n in ckpt.tensors if not is_known(n))
    if not unknown:
        return [ok("keys.unknown", f"all {len(ckpt.tensors)} tensor names are EAGLE-3 Llama drafter names")]
    shown = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
    if engine is not None and engine.name == "sglang":
        what = (f"{engine.label()} raises at load on {len(unknown)} tensor(s) it has no parameter for "
                f"(our {facts.KEYS_FAMILY} makes that loud)" if facts.unknown_keys_fail_loudly(engine) else
                f"{engine.label()} skips {len(unknown)} tensor(s) it has no parameter for, without a message")
        return [problem("keys.unknown", what, wanted="only EAGLE-3 Llama drafter tensor names", found=shown)]
    return [hint("keys.unknown", f"{len(unknown)} tensor(s) are not EAGLE-3 Llama drafter names "
                 "(SGLang skips such tensors without a message)", found=shown)]


def _shape(ckpt: Checkpoint, bare: str) -> tuple[int, ...] | None:
    for name, info in ckpt.tensors.items():
        if strip_model(name) == bare:
            return info.shape
    return None


def _decoder_shape(ckpt: Checkpoint, part: str) -> tuple[int, ...] | None:
    for name, info in ckpt.tensors.items():
        dk = decoder_key(name)
        if dk is not None and dk.layer == 0 and dk.part == part:
            return info.shape
    return None


def _target_hidden(d: DrafterConfig, t: TargetConfig | None) -> int | None:
    if t is not None and t.hidden_size is not None:
        return t.hidden_size
    return d.target_hidden_size or d.hidden_size


def _n(value: object) -> str:
    """A config value for a message: "(not set)" rather than "None"."""
    return "(not set)" if value is None else str(value)


def _check_fc(ckpt: Checkpoint, d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    out: list[Finding] = []
    th = _target_hidden(d, t)
    if t is not None and t.hidden_size is not None and d.hidden_size is not None:
        declared = d.target_hidden_size or d.hidden_size
        field = "target_hidden_size" if d.target_hidden_size else "hidden_size"
        if declared != t.hidden_size:
            out.append(problem("config.target_hidden_size",
                               f"the drafter's {field} {declared} is not the target's hidden size {t.hidden_size}: "
                               "the engine sizes fc's input from it",
                               wanted=f"{field} {t.hidden_size}" if field == "target_hidden_size"
                               else f'"target_hidden_size": {t.hidden_size}',
                               found=f"{field} {declared}"))
    if not d.use_aux_hidden_state:
        # One layer in, fc skipped: fine for a drafter trained that way, silent garbage otherwise.
        fc = _shape(ckpt, "fc.weight")
        return out + check_use_aux(fc[1] if fc is not None and len(fc) == 2 else None, d, th)
    shape = _shape(ckpt, "fc.weight")
    k = len(d.aux_layer_ids) if d.aux_layer_ids else DEFAULT_AUX_LAYERS
    if shape is None:
        out.append(problem("fc.shape", "no fc.weight: an EAGLE-3 drafter fuses the aux layers through fc",
                           wanted=f"fc.weight [{_n(d.hidden_size)}, {k} x {_n(th)}]", found="absent"))
        return out
    if len(shape) != 2 or th is None:
        out.append(problem("fc.shape", "fc.weight is not a matrix" if len(shape) != 2 else
                           "cannot size fc: no hidden size in the drafter config and no --target",
                           wanted=f"[hidden, {k} x target_hidden]", found=str(list(shape))))
        return out
    rows, cols = shape
    want = f"[{d.hidden_size or rows}, {k * th}] ({k} aux layers x {th})"
    if d.hidden_size is not None and rows != d.hidden_size:
        out.append(problem("fc.shape", f"fc.weight has {rows} outputs, the drafter's hidden size is {d.hidden_size}",
                           wanted=want, found=str(list(shape))))
    elif cols == k * th:
        ids = f" (layers {', '.join(map(str, d.aux_layer_ids))})" if d.aux_layer_ids else ""
        out.append(ok("fc.shape", f"fc.weight {list(shape)} fuses {k} aux layers x {th}{ids}"))
    elif cols % th == 0:
        m = cols // th
        what = (f"fc.weight was trained on {m} layer{'s' if m > 1 else ''} of {th} features; "
                f"EAGLE-3 feeds it {k} x {th} = {k * th}")
        if m == 1:
            what += " (an EAGLE-1 style fc)"
        out.append(problem("fc.shape", what, wanted=want, found=f"{list(shape)} ({m} x {th})",
                           hint="the config's eagle_aux_hidden_state_layer_ids must list as many layers as fc "
                                "was trained on"))
    else:
        out.append(problem("fc.shape", f"fc.weight input {cols} is not a multiple of the target hidden size {th}",
                           wanted=want, found=str(list(shape))))
    return out


def _check_vocab(ckpt: Checkpoint, d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    out: list[Finding] = []
    target_vocab = t.vocab_size if t is not None and t.vocab_size is not None else d.vocab_size
    draft_vocab = d.draft_vocab_size or d.vocab_size
    h = d.hidden_size
    if t is not None and t.vocab_size is not None and d.vocab_size is not None and d.vocab_size != t.vocab_size:
        out.append(problem("vocab.size", f"the drafter's vocab_size {d.vocab_size} is not the target's {t.vocab_size}",
                           wanted=f'"vocab_size": {t.vocab_size}', found=f'"vocab_size": {d.vocab_size}'))
    reduced = draft_vocab is not None and target_vocab is not None and draft_vocab < target_vocab
    d2t = _shape(ckpt, "d2t")
    if d2t is None and reduced:
        out.append(problem("vocab.d2t", f"no d2t although the draft vocab ({draft_vocab}) is smaller than the "
                           f"target's ({target_vocab}): draft token i would be taken as target token i",
                           wanted=f"d2t [{draft_vocab}]", found="absent",
                           hint="re-export the drafter with its d2t/t2d vocabulary maps"))
    elif d2t is not None and draft_vocab is not None and d2t != (draft_vocab,):
        out.append(problem("vocab.d2t", "d2t does not have one entry per draft token",
                           wanted=f"[{draft_vocab}]", found=str(list(d2t))))
    elif d2t is not None:
        out.append(ok("vocab.d2t", f"d2t {list(d2t)} maps the {draft_vocab}-token draft vocab into the target's"))
    t2d = _shape(ckpt, "t2d")
    if t2d is not None and target_vocab is not None and t2d != (target_vocab,):
        out.append(problem("vocab.t2d", "t2d does not have one entry per target token",
                           wanted=f"[{target_vocab}]", found=str(list(t2d))))
    lm_head = _shape(ckpt, "lm_head.weight")
    if lm_head is None:
        level = problem if reduced else hint
        out.append(level("vocab.lm_head", "no lm_head.weight" + (
            f": the draft vocab ({draft_vocab}) differs from the target's, so the target's head cannot stand in"
            if reduced else ": the engine uses the target's lm_head"),
            wanted=f"lm_head.weight [{_n(draft_vocab)}, {_n(h)}]", found="absent"))
    elif draft_vocab is not None and h is not None and lm_head != (draft_vocab, h):
        out.append(problem("vocab.lm_head", "lm_head.weight does not match draft_vocab_size x hidden_size",
                           wanted=f"[{draft_vocab}, {h}]", found=str(list(lm_head))))
    else:
        out.append(ok("vocab.lm_head", f"lm_head.weight {list(lm_head)}"))
    embed = _shape(ckpt, "embed_tokens.weight")
    if embed is None:
        out.append(hint("vocab.embed_tokens", "no embed_tokens.weight: the engine shares the target's embeddings",
                        found="absent"))
    elif target_vocab is not None and h is not None and embed != (target_vocab, h):
        out.append(problem("vocab.embed_tokens", "embed_tokens.weight does not match the target vocab x hidden_size",
                           wanted=f"[{target_vocab}, {h}]", found=str(list(embed))))
    else:
        out.append(ok("vocab.embed_tokens", f"embed_tokens.weight {list(embed)}"))
    return out


def _check_attention(ckpt: Checkpoint, d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    h, heads = d.hidden_size, d.num_attention_heads
    if h is None or not heads:
        return [problem("config.attention", "the drafter config lacks hidden_size or num_attention_heads",
                        wanted="hidden_size and num_attention_heads",
                        found=f"hidden_size {_n(h)}, num_attention_heads {_n(heads)}")]
    kv = d.num_key_value_heads or heads
    head_dim = d.head_dim or h // heads
    # EAGLE-3's decoder layer attends over [embeddings; fused hidden], hence 2 x hidden inputs.
    expected = {
        "self_attn.q_proj.weight": (heads * head_dim, 2 * h),
        "self_attn.k_proj.weight": (kv * head_dim, 2 * h),
        "self_attn.v_proj.weight": (kv * head_dim, 2 * h),
        "self_attn.o_proj.weight": (h, heads * head_dim),
    }
    out: list[Finding] = []
    for part, want in expected.items():
        got = _decoder_shape(ckpt, part)
        if got is not None and got != want:
            out.append(problem("shape.attention", f"{part} does not match {heads} heads x {head_dim} "
                               f"(kv heads {kv}) on hidden {h}", wanted=str(list(want)), found=str(list(got))))
    if not out:
        out.append(ok("shape.attention", f"hidden {h}, {heads} heads ({kv} kv) x {head_dim} match the weights"))
    if t is not None and t.hidden_size is not None and h != t.hidden_size and d.target_hidden_size is None:
        out.append(hint("shape.hidden", f"drafter hidden {h} differs from the target's {t.hidden_size}",
                        hint='state "target_hidden_size" in the drafter config'))
    return out


def _check_context(d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    if t is None:
        return []
    out: list[Finding] = []
    dm, tm = d.max_position_embeddings, t.max_position_embeddings
    if dm is not None and tm is not None and dm < tm:
        out.append(hint("context.max_position", f"the drafter was configured for {dm} positions, the target "
                        f"serves {tm}: drafts beyond {dm} tokens of context are out of its training range",
                        wanted=f">= {tm}", found=str(dm)))
    for field, dv, tv in (("rope_theta", d.rope_theta, t.rope_theta),
                          ("rope_scaling", d.rope_scaling, t.rope_scaling)):
        if dv != tv:
            out.append(hint(f"context.{field}", f"{field} differs from the target's (fine if the drafter was "
                            "trained this way; the engine uses the drafter's own)", wanted=_n(tv), found=_n(dv)))
    if not out:
        out.append(ok("context.rope", "max_position_embeddings and rope settings match the target"))
    return out


def _check_dtype(ckpt: Checkpoint, d: DrafterConfig) -> list[Finding]:
    # d2t/t2d are integer/bool index maps, not weights; the engine never casts them.
    dtypes = sorted({i.dtype for n, i in ckpt.tensors.items() if strip_model(n) not in ("d2t", "t2d")})
    out: list[Finding] = []
    if len(dtypes) > 1:
        out.append(hint("dtype.mixed", "weights mix dtypes; the engine casts them all to its --dtype",
                        found=", ".join(dtypes)))
    declared = _TORCH_DTYPES.get(d.torch_dtype or "")
    if declared and dtypes and declared not in dtypes:
        out.append(hint("dtype.config", f"config says {d.torch_dtype}, the weights are {', '.join(dtypes)}",
                        wanted=declared, found=", ".join(dtypes)))
    d2t = next((i for n, i in ckpt.tensors.items() if strip_model(n) == "d2t"), None)
    if d2t is not None and d2t.dtype not in ("I64", "I32"):
        out.append(problem("dtype.d2t", "d2t holds token offsets and must be an integer tensor",
                           wanted="I64", found=d2t.dtype))
    if not out and dtypes:
        out.append(ok("dtype", f"weights are {dtypes[0]}"))
    return out
