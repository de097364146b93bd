"""``drafter check``: tensor shapes and config values that must agree with each other and
with the target (vocabulary maps, attention, context, dtypes). No engine facts here (the RoPE
normal form comes from facts).
"""

from __future__ import annotations

from patcher.drafter import eagle31, facts, rope
from patcher.drafter.checkpoint import Checkpoint
from patcher.drafter.configs import DrafterConfig, TargetConfig
from patcher.drafter.key_names import decoder_key, strip_model
from patcher.drafter.release_checks import MLA_DRAFTERS
from patcher.findings import Finding, hint, ok, problem
from patcher.release.release import Release

_TORCH_DTYPES = {"bfloat16": "BF16", "float16": "F16", "half": "F16", "float32": "F32", "float": "F32"}


def shape_of(ckpt: Checkpoint, bare: str) -> tuple[int, ...] | None:
    for name, info in ckpt.tensors.items():
        if strip_model(name) == bare:
            return info.shape
    return None


def decoder_shape(ckpt: Checkpoint, part: str) -> tuple[int, ...] | None:
    for name, info in ckpt.tensors.items():
        dk = decoder_key(name)
        if dk is not None and dk.layer == 0 and dk.part == part:
            return info.shape
    return None


def n_or_unset(value: object) -> str:
    """A config value for a message: "(not set)" rather than "None"."""
    return "(not set)" if value is None else str(value)


def check_vocab(ckpt: Checkpoint, d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    out: list[Finding] = []
    target_vocab = t.vocab_size if t is not None and t.vocab_size is not None else d.vocab_size
    draft_vocab = d.draft_vocab_size or d.vocab_size
    h = d.hidden_size
    if t is not None and t.vocab_size is not None and d.vocab_size is not None and d.vocab_size != t.vocab_size:
        out.append(problem("vocab.size", f"the drafter's vocab_size {d.vocab_size} is not the target's {t.vocab_size}",
                           wanted=f'"vocab_size": {t.vocab_size}', found=f'"vocab_size": {d.vocab_size}'))
    reduced = draft_vocab is not None and target_vocab is not None and draft_vocab < target_vocab
    d2t = shape_of(ckpt, "d2t")
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
    t2d = shape_of(ckpt, "t2d")
    if t2d is not None and target_vocab is not None and t2d != (target_vocab,):
        out.append(problem("vocab.t2d", "t2d does not have one entry per target token",
                           wanted=f"[{target_vocab}]", found=str(list(t2d))))
    lm_head = shape_of(ckpt, "lm_head.weight")
    if lm_head is None:
        level = problem if reduced else hint
        out.append(level("vocab.lm_head", "no lm_head.weight" + (
            f": the draft vocab ({draft_vocab}) differs from the target's, so the target's head cannot stand in"
            if reduced else ": the engine uses the target's lm_head"),
            wanted=f"lm_head.weight [{n_or_unset(draft_vocab)}, {n_or_unset(h)}]", found="absent"))
    elif draft_vocab is not None and h is not None and lm_head != (draft_vocab, h):
        out.append(problem("vocab.lm_head", "lm_head.weight does not match draft_vocab_size x hidden_size",
                           wanted=f"[{draft_vocab}, {h}]", found=str(list(lm_head))))
    else:
        out.append(ok("vocab.lm_head", f"lm_head.weight {list(lm_head)}"))
    embed = shape_of(ckpt, "embed_tokens.weight")
    if embed is None:
        out.append(hint("vocab.embed_tokens", "no embed_tokens.weight: the engine shares the target's embeddings",
                        found="absent"))
    elif target_vocab is not None and h is not None and embed != (target_vocab, h):
        out.append(problem("vocab.embed_tokens", "embed_tokens.weight does not match the target vocab x hidden_size",
                           wanted=f"[{target_vocab}, {h}]", found=str(list(embed))))
    else:
        out.append(ok("vocab.embed_tokens", f"embed_tokens.weight {list(embed)}"))
    return out


def check_attention(ckpt: Checkpoint, d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    h, heads = d.hidden_size, d.num_attention_heads
    if h is None or not heads:
        return [problem("config.attention", "the drafter config lacks hidden_size or num_attention_heads",
                        wanted="hidden_size and num_attention_heads",
                        found=f"hidden_size {n_or_unset(h)}, num_attention_heads {n_or_unset(heads)}")]
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
        got = decoder_shape(ckpt, part)
        if got is not None and got != want:
            out.append(problem("shape.attention", f"{part} does not match {heads} heads x {head_dim} "
                               f"(kv heads {kv}) on hidden {h}", wanted=str(list(want)), found=str(list(got))))
    if not out:
        out.append(ok("shape.attention", f"hidden {h}, {heads} heads ({kv} kv) x {head_dim} match the weights"))
    if t is not None and t.hidden_size is not None and h != t.hidden_size and d.target_hidden_size is None:
        out.append(hint("shape.hidden", f"drafter hidden {h} differs from the target's {t.hidden_size}",
                        hint='state "target_hidden_size" in the drafter config'))
    return out


def check_context(d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    if t is None:
        return []
    out: list[Finding] = []
    dm, tm = d.max_position_embeddings, t.max_position_embeddings
    if dm is not None and tm is not None and dm < tm:
        out.append(hint("context.max_position", f"the drafter was configured for {dm} positions, the target "
                        f"serves {tm}: drafts beyond {dm} tokens of context are out of its training range",
                        wanted=f">= {tm}", found=str(dm)))
    trained = rope.trained_rope(d.rope_theta, d.rope_scaling, d.rope_parameters)
    target = rope.trained_rope(t.rope_theta, t.rope_scaling, None)
    if trained != target:
        out.append(hint("context.rope", "the drafter's RoPE differs from the target's (fine if it was trained "
                        "this way; the engine uses the drafter's own)", wanted=str(target), found=str(trained)))
    if not out:
        out.append(ok("context.rope", "max_position_embeddings and rope settings match the target"))
    return out


def check_dtype(ckpt: Checkpoint, d: DrafterConfig) -> list[Finding]:
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


def check_mlp(ckpt: Checkpoint, d: DrafterConfig, release: Release | None) -> list[Finding]:
    """A mixture-of-experts MLP (TorchSpec's ``use_moe``): no engine builds one for an EAGLE-3
    drafter. Every release's Llama and MLA drafter classes build a dense MLP and read neither key
    (tests/test_drafter_release.py reads the model files of every release); the expert tensors
    then have no parameter, and what the loader does with a tensor it has no parameter for is the
    engine's rule (``switch_weights``): refused at load, or dropped with the dense MLP left random."""
    if not d.moe:
        return []
    experts = [k for k in ckpt.tensors if ".mlp.experts." in k or ".mlp.gate." in k or ".mlp.shared_experts." in k]
    said = ", ".join(d.moe)
    if not experts:  # judged by its tensors (issue 53): a dense head whose config copies the base model's key
        return [hint("shape.mlp", f"the config names a mixture-of-experts MLP ({said}), but the checkpoint holds "
                     "no expert tensor: a dense head with the key copied from the base model's config (as "
                     "ModelOpt exports one); the engines build a dense MLP, and the keys.* findings say whether "
                     "its tensors fill it", found=said)]
    built = "a dense MLP (its EAGLE-3 drafter classes read neither use_moe nor n_routed_experts)"
    if release is None or release.version is None:
        what = f"the engines build {built}"
    else:
        drafter_class = "mla" if any(a in MLA_DRAFTERS for a in d.architectures) else "llama"
        outcome, why = facts.reading(release).switch_weights(release, "use_moe", drafter_class, "layers.0.mlp.experts.")
        after = ("the load stops" if outcome == eagle31.REFUSED else
                 "the load goes on and the dense MLP keeps its random initial weights")
        what = f"{release.label()} builds {built}; of the {len(experts)} expert tensor(s), {why}: {after}"
    return [problem("shape.mlp", f"the drafter was trained with a mixture-of-experts MLP ({said}), and {what}",
                    wanted="a dense MLP (TorchSpec: use_moe false)", found=said,
                    hint="no engine release runs a MoE EAGLE-3 drafter: retrain it with a dense MLP")]
