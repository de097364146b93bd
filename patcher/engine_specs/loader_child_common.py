"""The part every engine's loader child shares; ``release_loader`` sends it first, then the engine's
own script (``<engine>/loader_child.py``), as one program to the engine's interpreter.

The question it answers: what does this release's own loader do with this drafter checkpoint? The
engine's script builds the drafter model the way the server does (the class the release resolves
for the drafter's config, its real ``__init__``), on PyTorch's meta device: every parameter has its
true shape and no memory. Then the release's own load path is fed the checkpoint's names with
tensors of the checkpoint's shapes and dtypes and no data (``Tracked``), and we watch:

- which parameter each checkpoint key reaches, and which part of it is written (a ``Tracked``
  tensor carries the keys it was made from through every op the loader applies: a narrow, a
  concatenation of q/k/v, a cast; a write into a parameter's storage records them);
- the loader's own refusals: a raise (our eagle3-drafter-keys, vLLM's strict tracking, a shape
  assertion of a weight loader) is the release's verdict, in its words;
- what the engine does next with the weights it shares with the target (the engine's script, as
  its worker does after the load), and what the model keeps outside its parameters (SGLang keeps
  ``d2t`` as ``hot_token_id``).

The engine's script defines ``build(req)`` (import, configure and construct on meta; raise
``Refused`` where the release itself refuses the drafter, any other exception means it cannot be
asked here), ``load(model, weights)`` (the release's load call) and ``share(model, req)`` (the
target's weights the worker puts in), and may define ``capture(req)``: the target layers the
release captures for this drafter, per model runner, by its own code (the runner's reading of the
drafter's config, the target class's setter run on a ``bare_target``); then it calls
``run(build, load, share, capture)``. One answer, the marker, then JSON.

Standard library and torch only: it runs inside the engine's environment.

Over 300 lines: it is sent whole, with the engine's script, as one program to the engine's
interpreter, which has no patcher to import the parts from.
"""

import json
import os
import sys
import traceback

MARK = "@@kimi-patcher-load@@ "
# safetensors dtype names -> torch's
DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64", "I64": "int64",
          "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
          "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


class Refused(Exception):
    """The release itself refuses the drafter before any weight is read (no class for it)."""


def say(**result):
    print(MARK + json.dumps(result, default=str), flush=True)


def where(exc):
    """The innermost frame of ``exc`` inside the engine's package (else in site-packages, else any)."""
    frames = traceback.extract_tb(exc.__traceback__)
    engine = [f for f in frames if "/vllm/" in f.filename or "/sglang/" in f.filename]
    f = (engine or [f for f in frames if "site-packages" in f.filename] or frames or [None])[-1]
    if f is None:
        return ""
    path = f.filename.replace(os.sep, "/")
    for root in ("/site-packages/", "/python/"):
        if root in path:
            path = path.split(root, 1)[1]
    return f"{path}:{f.lineno}"


def words(exc):
    """The exception as the release words it; a pydantic ValidationError by its messages alone
    (its own text repeats the whole input and a link)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return f"{type(exc).__name__}: " + "; ".join(str(e.get("msg", e)) for e in errors())
        except Exception:
            pass
    return f"{type(exc).__name__}: {exc}"


def tracked_tensor_class(torch):
    """A tensor that carries the checkpoint keys it was made from through every torch op."""

    class Tracked(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            keys = set()
            _collect((args, kwargs), keys)
            out = super().__torch_function__(func, types, args, kwargs)
            if keys:
                _mark(out, keys)
                if getattr(func, "__name__", "").endswith("_") or func is torch.Tensor.__setitem__:
                    dest = args[0] if args else None  # an in-place op writes its first argument
                    if isinstance(dest, torch.Tensor):
                        WRITES.append((dest, frozenset(keys)))
            return out

    def _collect(obj, keys):
        if isinstance(obj, Tracked):
            keys.update(getattr(obj, "_kp_keys", ()))
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                _collect(x, keys)
        elif isinstance(obj, dict):
            for x in obj.values():
                _collect(x, keys)

    def _mark(obj, keys):
        if isinstance(obj, Tracked):
            obj._kp_keys = frozenset(keys) | getattr(obj, "_kp_keys", frozenset())
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                _mark(x, keys)

    return Tracked


WRITES: list = []  # (tensor written in place, keys written into it), in order


def weights(torch, header, Tracked):
    """The checkpoint as the loader iterates it: (name, tensor) with the true shape and dtype.
    Floating tensors of more than one element live on the meta device (no memory); integer maps
    (d2t, t2d) and scalars are real zeros on the CPU, since loaders compute with them
    (``d2t + arange``, ``.item()``)."""
    for name, (dtype, shape) in header.items():
        dt = getattr(torch, DTYPES.get(dtype, "float32"))
        numel = 1
        for d in shape:
            numel *= d
        if dt.is_floating_point and numel > 1:
            base = torch.empty(shape, dtype=dt, device="meta")
        else:
            base = torch.zeros(shape, dtype=dt)
        t = base.as_subclass(Tracked)
        t._kp_keys = frozenset([name])
        yield name, t


def coverage(writes, param):
    """The elements of ``param`` the writes reached: merged [start, end) spans of its storage."""
    spans = []
    for dest, _ in writes:
        n = dest.numel()
        if n == 0:
            continue
        start = dest.storage_offset()
        if dest.is_contiguous():
            end = start + n
        else:  # a strided view: the span from its first to its last element
            end = start + 1 + sum((s - 1) * st for s, st in zip(dest.shape, dest.stride()))
        spans.append((start, end))
    spans.sort()
    merged = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    base = param.storage_offset()
    total = param.numel()
    return sum(max(0, min(e, base + total) - max(s, base)) for s, e in merged)


def required(model, name, param):
    """Elements of ``param`` a checkpoint must fill: all, except a vocabulary table's padding rows
    (a vocab-parallel embedding pads its rows; the loader fills the original vocabulary)."""
    owner = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
    org = getattr(owner, "org_vocab_size", None)
    if isinstance(org, int) and param.dim() == 2 and 0 < org < param.shape[0]:
        return org * param.shape[1]
    return param.numel()


def module_by_suffix(model, key):
    """The model's module the key's path names, matched by the longest unique suffix (a checkpoint
    may say ``midlayer.`` or ``layers.0.`` where the model says ``model.layers.0.``)."""
    parts = key.split(".")[:-1]
    names = [n for n, _ in model.named_modules() if n]
    for i in range(len(parts)):
        suffix = ".".join(parts[i:])
        found = [n for n in names if n == suffix or n.endswith("." + suffix)]
        if len(found) == 1:
            return found[0], model.get_submodule(found[0])
    return None, None


def kept_outside_parameters(model, Tracked):
    """Tensors the model holds as plain attributes (not parameters) that came from the checkpoint:
    SGLang keeps d2t as ``hot_token_id``."""
    out = {}
    for mname, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, Tracked) and getattr(value, "_kp_keys", None):
                out[f"{mname}.{attr}" if mname else attr] = sorted(value._kp_keys)
    return out


class Stand:
    """An object whose attributes are set by hand: a stand-in model runner or decoder for the release's
    own methods to run on (a missing attribute raises, and the question is then not answered)."""


def bare_target(torch, cls, hf_config, layers, resolve=None):
    """The target model class the release resolves, without its ``__init__`` (no weights, no
    kernels): the aux-layer setters and defaults are its own methods, run on this object. What
    they read is the target's config, the decoder's layer list and the pipeline rank (the last
    rank: the one that captures). Returns the target and the decoder its setters record on.

    A multimodal wrapper (Kimi-K2.5) hands the setters to the text model its ``__init__`` builds
    (``self.language_model = ...``): that model is made bare the same way, from the class the
    wrapper's own ``__init__`` names (``text_model_built_in``; ``resolve(callee, keywords, text)``
    turns an engine's factory call into its class), and set where the wrapper keeps it."""
    built = text_model_built_in(cls)
    if built is None:
        return _bare(torch, cls, hf_config, layers)
    attr, callee, keywords = built
    text = hf_config.text_config
    inner, decoder = _bare(torch, resolve(callee, keywords, text) if resolve else callee, text, layers)
    if not isinstance(inner, torch.nn.Module):
        raise TypeError(f"{cls.__name__}.{attr} is built by {callee!r}, not a model class")
    outer = cls.__new__(cls)
    torch.nn.Module.__init__(outer)
    outer.config = hf_config
    setattr(outer, attr, inner)
    return outer, decoder


def _bare(torch, cls, hf_config, layers):
    bare = cls.__new__(cls)
    torch.nn.Module.__init__(bare)
    decoder = Stand()
    decoder.layers = [None] * layers
    decoder.start_layer, decoder.end_layer, decoder.config = 0, layers, hf_config
    rank = Stand()
    rank.is_last_rank = rank.is_first_rank = True
    rank.world_size = 1
    bare.config, bare.model, bare.pp_group = hf_config, decoder, rank
    return bare, decoder


def text_model_built_in(cls):
    """Where a wrapper's ``__init__`` builds its text model: (attribute, callee, {keyword: source})
    of the first ``self.X = f(...)`` handed ``text_config`` itself as an argument, the callee looked up in
    the class's module (a model class, or a factory such as vLLM's ``init_vllm_registered_model``);
    None for a target that builds none (a decoder-only model), or whose source cannot be read."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        target, call = node.targets[0], node.value
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
            continue
        given = [*call.args, *(kw.value for kw in call.keywords)]
        if not any(getattr(a, "attr", getattr(a, "id", None)) == "text_config" for a in given):
            continue  # not handed the text config itself (a projector reads only its hidden size)
        if not isinstance(call.func, (ast.Name, ast.Attribute)):
            continue
        namespace = vars(sys.modules[cls.__module__])
        callee = eval(compile(ast.Expression(call.func), "<callee>", "eval"), dict(namespace))  # a name, no call
        return target.attr, callee, {kw.arg: ast.unparse(kw.value) for kw in call.keywords if kw.arg}
    return None


def captured(capture, req):
    """``capture(req)`` as an answer: {runner: {"layers": [...]} or {"error": why}}; {} where the
    request names no target (the layer count and class are the target's)."""
    if capture is None or not req.get("target"):
        return {}
    try:
        got = capture(req)
    except BaseException as exc:
        return {"": {"error": f"{words(exc)} ({where(exc)})"[:400]}}
    return {runner: ({"layers": [int(i) for i in value]} if isinstance(value, (list, tuple)) else
                     {"error": str(value)[:400]}) for runner, value in got.items()}


def answer(build, load, share, req, torch, Tracked):
    """One drafter asked of the release: its answer, as a dict."""
    del WRITES[:]
    try:
        model = build(req)
    except Refused as exc:
        return dict(status="refused", stage="build", error=str(exc)[:900], where=where(exc.__cause__ or exc))
    except BaseException as exc:  # our stand-ins could not bring the release this far
        return dict(status="unavailable", error=words(exc)[:400], where=where(exc))
    params = dict(model.named_parameters(remove_duplicate=False))
    by_storage = {}
    for name, p in params.items():
        by_storage.setdefault(p.untyped_storage()._cdata, []).append(name)
    reached = {}  # weight_loader calls: the second channel, for loaders that assign rather than copy

    def recording(name, loader):
        def rec(param, w, *args, **kwargs):
            reached.setdefault(name, set()).update(getattr(w, "_kp_keys", ()))
            return loader(param, w, *args, **kwargs)
        return rec

    for name, p in params.items():
        loader = getattr(p, "weight_loader", None)
        if callable(loader):
            p.weight_loader = recording(name, loader)
    header = {k: tuple(v) for k, v in req["header"].items()}
    status, error, at = "loaded", "", ""
    try:
        load(model, weights(torch, header, Tracked))
    except BaseException as exc:
        text = words(exc)
        # Meta tensors hold no data: an error about them is ours, not the release's verdict.
        status = "unavailable" if "meta" in text.lower() else "refused"
        error, at = text[:900], where(exc)
    writes = {}
    for dest, keys in WRITES:
        for name in by_storage.get(dest.untyped_storage()._cdata, ()):
            writes.setdefault(name, []).append((dest, keys))
    kept = kept_outside_parameters(model, Tracked)
    target = set()
    if status == "loaded":
        try:
            target = share(model, req)
        except BaseException as exc:
            status, error, at = "unavailable", f"sharing the target's weights: {words(exc)}"[:400], where(exc)
    out = {}
    for name, p in params.items():
        sources = set(reached.get(name, ())) | {k for _, ks in writes.get(name, ()) for k in ks}
        need = required(model, name, p)
        done = min(coverage(writes.get(name, ()), p), need) if name in writes else (need if sources else 0)
        out[name] = {"shape": list(p.shape), "sources": sorted(sources), "covered": done / need if need else 1.0,
                     "target": name in target}
    used = {k for v in out.values() for k in v["sources"]} | {k for ks in kept.values() for k in ks}
    computed = {}
    for key in header:
        if key in used:
            continue
        path, module = module_by_suffix(model, key)
        if module is not None and not any(True for _ in module.parameters(recurse=False)) \
                and any(True for _ in module.buffers(recurse=False)):
            computed[key] = path  # a buffer module the release fills itself (rotary)
    return dict(status=status, error=error, where=at, model=f"{type(model).__module__}.{type(model).__qualname__}",
                params=out, kept=kept, computed=computed)


def run(build, load, share, capture=None):
    """Every drafter of the request (JSON on stdin: a request can outgrow one argument), each
    answered on its own line; one import serves them all."""
    asks = json.loads(sys.stdin.read())["asks"]
    try:
        import torch
    except BaseException as exc:
        for i in range(len(asks)):
            say(index=i, status="unavailable", error=words(exc)[:300], where="")
        return
    Tracked = tracked_tensor_class(torch)
    for i, req in enumerate(asks):
        say(index=i, **answer(build, load, share, req, torch, Tracked), capture=captured(capture, req))
