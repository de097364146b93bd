"""``drafter fix``, the copy: write the planned copy of a drafter and verify every tensor.

What changes: decoder-layer key names (``layers.0.`` <-> ``midlayer.``) and config.json
(speculators format -> the LlamaForCausalLMEagle3 config SGLang reads). What never
changes: tensor bytes. Renaming keys leaves data offsets untouched (they are relative to
the data section), so only the header is rewritten and the data section is streamed
across; every tensor is then hashed on both sides and any difference aborts.

Crash safety: everything is built in a hidden temp folder beside ``--out`` and renamed
to the final name last, so an interrupted run never leaves a half-written drafter
under the name the user will point the engine at. The input folder is never written.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from patcher.drafter.checkpoint import INDEX_NAME, Checkpoint
from patcher.drafter.fix_plan import FixPlan
from patcher.drafter.key_names import rename
from patcher.drafter.safetensors_header import SafetensorsHeader, encode_header, read_header
from patcher.errors import DrafterInputError, FixFailed

CHUNK = 16 << 20  # bounded memory per worker; large enough that syscalls do not dominate


@dataclass(frozen=True)
class FixResult:
    out: Path
    plan: FixPlan
    files: tuple[str, ...]  # files written, relative to out
    tensors_verified: int
    bytes_verified: int

def refuse_bad_out(ckpt: Checkpoint, out: Path) -> Path:
    out = Path(out)
    if os.path.lexists(out):
        raise DrafterInputError(f"{out}: already exists", wanted="a new path for the converted drafter",
                                found="an existing " + ("folder" if out.is_dir() else "file"),
                                hint="fix never overwrites; choose another --out or remove it first")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise DrafterInputError(f"{out}: parent folder does not exist", wanted=f"an existing folder {parent}",
                                found="missing")
    src = ckpt.folder.resolve()
    if parent.resolve() == src or src in parent.resolve().parents:
        raise DrafterInputError(f"{out}: inside the input drafter folder", wanted="--out outside " + str(src),
                                found=str(out), hint="fix never writes into or next to the input files")
    return out


Progress = Callable[[str, int, int], None]  # (phase, bytes done, bytes in all)


def write_fix(ckpt: Checkpoint, plan: FixPlan, out: Path, *, workers: int | None = None,
              progress: Progress | None = None) -> FixResult:
    out = refuse_bad_out(ckpt, out)
    report = progress or (lambda _phase, _done, _total: None)
    total = sum(h.data_size for h in ckpt.files)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.absolute().parent))
    # mkdtemp makes the folder 0700 whatever the umask; the final folder must be readable as
    # `cp -r` would make it, e.g. by a serving container running as another user.
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        written: list[str] = []
        pairs: list[tuple[SafetensorsHeader, Path]] = []
        done = 0
        report("copying", 0, total)
        for header in ckpt.files:
            dst = tmp / header.path.name
            _write_shard(header, plan, dst, _offset_progress(report, "copying", done, total))
            done += header.data_size
            report("copying", done, total)
            pairs.append((header, dst))
            written.append(dst.name)
        _write_json(tmp / "config.json", plan.config)
        written.append("config.json")
        if ckpt.index is not None:
            index = dict(ckpt.index)
            index["weight_map"] = {_new_name(n, plan): f for n, f in ckpt.index["weight_map"].items()}
            _write_json(tmp / INDEX_NAME, index)
            written.append(INDEX_NAME)
        written += _copy_side_files(ckpt, tmp, set(written))
        tensors, nbytes = _verify(pairs, plan, workers or os.cpu_count() or 1,
                                  lambda n: report("verifying", n, total))
        _fsync_tree(tmp)
        if os.path.lexists(out):  # created by someone else while we worked
            raise DrafterInputError(f"{out}: appeared while fix was running", wanted="a new path",
                                    found="an existing entry", hint="nothing was written under that name")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return FixResult(out=out, plan=plan, files=tuple(written), tensors_verified=tensors, bytes_verified=nbytes)


def _offset_progress(report: Progress, phase: str, base: int, total: int) -> Callable[[int], None]:
    return lambda n: report(phase, base + n, total)


def _umask() -> int:
    # No getter before Python 3.13 (os.umask reads by setting); one process, one thread here.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_name(name: str, plan: FixPlan) -> str:
    if plan.rename_from is None or plan.rename_to is None:
        return name
    return rename(name, plan.rename_from, plan.rename_to)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _copy_side_files(ckpt: Checkpoint, tmp: Path, done: set[str]) -> list[str]:
    # Tokenizer files, generation_config.json, README: carried over unchanged so the
    # copy is a complete drafter folder. Stray .safetensors files the engine would not
    # load are left behind, like sub-folders.
    copied = []
    for entry in sorted(ckpt.folder.iterdir()):
        if entry.name in done or not entry.is_file() or entry.suffix == ".safetensors" or entry.name == INDEX_NAME:
            continue
        shutil.copyfile(entry, tmp / entry.name)
        copied.append(entry.name)
    return copied


def _write_shard(header: SafetensorsHeader, plan: FixPlan, dst: Path,
                 progress: Callable[[int], None] | None = None) -> None:
    infos = sorted(header.tensors.values(), key=lambda t: t.begin)
    renamed = [replace(t, name=_new_name(t.name, plan)) for t in infos]
    new_header = encode_header(renamed, header.metadata)
    with open(header.path, "rb") as fi, open(dst, "wb") as fo:
        fo.write(new_header)
        fo.flush()
        _copy_data(fi.fileno(), fo.fileno(), header.data_start, len(new_header), header.file_size, progress)
        os.ftruncate(fo.fileno(), len(new_header) + header.data_size)


def _data_extents(fd: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Ranges of [start, end) that hold data. Holes of a sparse file read as zeros, so
    skipping them and truncating the output to size gives the same bytes (like cp)."""
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                return
            yield pos, end  # filesystem without SEEK_DATA: everything is data
            return
        if data >= end:
            return
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        yield data, hole
        pos = hole


def _copy_data(fi: int, fo: int, src_start: int, dst_start: int, src_end: int,
               progress: Callable[[int], None] | None = None) -> None:
    for begin, end in _data_extents(fi, src_start, src_end):
        src, dst = begin, dst_start + (begin - src_start)
        while src < end:
            n = min(CHUNK * 4, end - src)
            try:
                # In-kernel copy: no trip through Python buffers; reflinks where supported.
                done = os.copy_file_range(fi, fo, n, src, dst)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                done = _pread_pwrite(fi, fo, n, src, dst)
            if done <= 0:
                raise FixFailed("input file shrank while copying", wanted=f"{end - src} more bytes",
                                found="end of file")
            src += done
            dst += done
            if progress is not None:
                progress(src - src_start)


def _pread_pwrite(fi: int, fo: int, n: int, src: int, dst: int) -> int:
    buf = os.pread(fi, min(n, CHUNK), src)
    if buf:
        os.pwrite(fo, buf, dst)
    return len(buf)


def _verify(pairs: list[tuple[SafetensorsHeader, Path]], plan: FixPlan, workers: int,
            progress: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Hash every tensor's bytes in the input and in the copy; raise FixFailed on any difference."""
    jobs: list[tuple[str, str, int, int, int, int, int]] = []
    fds: list[int] = []
    try:
        for src_header, dst_path in pairs:
            dst_header = read_header(dst_path)
            src_fd, dst_fd = os.open(src_header.path, os.O_RDONLY), os.open(dst_path, os.O_RDONLY)
            fds += [src_fd, dst_fd]
            for t in src_header.tensors.values():
                new = dst_header.tensors.get(_new_name(t.name, plan))
                if new is None or (new.dtype, new.shape, new.begin, new.end) != (t.dtype, t.shape, t.begin, t.end):
                    raise FixFailed(f"tensor {t.name!r} changed in the rewritten header",
                                    wanted=f"{t.dtype} {list(t.shape)} at {t.begin}",
                                    found="absent" if new is None else f"{new.dtype} {list(new.shape)} at {new.begin}")
                for off in range(t.begin, t.end, CHUNK) if t.end > t.begin else [t.begin]:
                    n = min(CHUNK, t.end - off)
                    jobs.append((t.name, src_header.path.name, src_fd, src_header.data_start + off,
                                 dst_fd, dst_header.data_start + off, n))
        return _hash_jobs(jobs, workers, progress)
    finally:
        for fd in fds:
            os.close(fd)


def _hash_jobs(jobs: list[tuple[str, str, int, int, int, int, int]], workers: int,
               progress: Callable[[int], None] | None = None) -> tuple[int, int]:
    # A tensor's digest is a hash over its chunk digests, so one large tensor (embed_tokens
    # is half of a drafter) still spreads over every core; hashlib releases the GIL.
    per_tensor: dict[tuple[str, str], tuple[hashlib._Hash, hashlib._Hash]] = {}
    total = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for (name, shard, *_rest), (a, b, n) in zip(jobs, pool.map(_hash_pair, jobs)):
            ha, hb = per_tensor.setdefault((shard, name), (hashlib.sha256(), hashlib.sha256()))
            ha.update(a)
            hb.update(b)
            total += n
            if progress is not None:
                progress(total)
    for (shard, name), (ha, hb) in per_tensor.items():
        if ha.digest() != hb.digest():
            raise FixFailed(f"tensor {name!r} in {shard} differs after the copy",
                            wanted=f"sha256 {ha.hexdigest()}", found=f"sha256 {hb.hexdigest()}",
                            hint="disk or filesystem error? nothing was written under --out")
    return len(per_tensor), total


_buffers = threading.local()


_HOLE = b"hole"  # stands for the digest of a range that is a hole on both sides (zeros, unread)


def _is_hole(fd: int, offset: int, n: int) -> bool:
    try:
        return os.lseek(fd, offset, os.SEEK_DATA) >= offset + n
    except OSError as exc:  # ENXIO: no data after offset; anything else: cannot tell, so read it
        return exc.errno == errno.ENXIO


def _hash_pair(job: tuple[str, str, int, int, int, int, int]) -> tuple[bytes, bytes, int]:
    _name, _shard, src_fd, src_off, dst_fd, dst_off, n = job
    # A hole reads as zeros; when the range is a hole in both files the bytes are equal without
    # reading them (a sparse drafter is mostly holes). Any other mix is read and hashed.
    if n and _is_hole(src_fd, src_off, n) and _is_hole(dst_fd, dst_off, n):
        return _HOLE, _HOLE, n
    return _hash_range(src_fd, src_off, n), _hash_range(dst_fd, dst_off, n), n


def _hash_range(fd: int, offset: int, n: int) -> bytes:
    # One reused buffer per thread: allocating 16 MiB per chunk cost more (page faults)
    # than hashing it.
    buf = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = bytearray(CHUNK)
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        step = os.preadv(fd, [view[got:]], offset + got)
        if step <= 0:
            raise FixFailed("short read while verifying the copy", wanted=f"{n} bytes at {offset}",
                            found=f"{got} bytes")
        got += step
    return hashlib.sha256(view).digest()


def _fsync_tree(folder: Path) -> None:
    for entry in folder.iterdir():
        with open(entry, "rb") as fh:
            os.fsync(fh.fileno())
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
