"""A checkpoint folder as the engines see it: config.json plus one or more safetensors
files, sharded through model.safetensors.index.json. Headers only, never tensor bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from patcher.drafter.safetensors_header import SafetensorsHeader, TensorInfo, read_header
from patcher.errors import DrafterInputError

INDEX_NAME = "model.safetensors.index.json"


@dataclass(frozen=True)
class Checkpoint:
    folder: Path
    config: dict
    files: tuple[SafetensorsHeader, ...]
    tensors: dict[str, TensorInfo]  # name -> info, over all files
    file_of: dict[str, Path]  # name -> the file holding it
    index: dict | None  # the parsed index.json, when sharded


def read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DrafterInputError(f"{path}: no {what}", wanted=f"{path.name} in {path.parent}",
                                found="no such file",
                                hint="point at the checkpoint folder (the one holding config.json)") from None
    except OSError as exc:
        raise DrafterInputError(f"{path}: cannot read {what}", wanted="a readable file",
                                found=exc.strerror or str(exc)) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise DrafterInputError(f"{path}: {what} is not valid JSON", wanted="a JSON object",
                                found=str(exc)[:120]) from None
    if not isinstance(data, dict):
        raise DrafterInputError(f"{path}: {what} is not a JSON object", wanted="a JSON object",
                                found=type(data).__name__)
    return data


def _require_folder(folder: Path) -> Path:
    folder = Path(folder)
    if folder.is_dir():
        return folder
    if folder.exists():
        raise DrafterInputError(f"{folder}: not a folder", wanted="a checkpoint folder with config.json",
                                found="a file", hint=f"pass the folder, not a file inside it: {folder.parent}")
    if re.fullmatch(r"[\w.-]+/[\w.-]+", str(folder)):  # how a Hub id looks; the checks read local files
        hint = (f"a Hugging Face repo id? download it first (huggingface-cli download {folder} "
                f"--local-dir {folder.name}) and pass that folder")
    else:
        hint = f"check the path; it is read from {Path.cwd()}" if not folder.is_absolute() else "check the path"
    raise DrafterInputError(f"{folder}: no such folder", wanted="a checkpoint folder with config.json",
                            found="nothing at that path", hint=hint)


def read_config(folder: Path) -> dict:
    return read_json(_require_folder(folder) / "config.json", "config.json")


def read_checkpoint(folder: Path) -> Checkpoint:
    folder = _require_folder(folder)
    config = read_config(folder)
    index_path = folder / INDEX_NAME
    index: dict | None = None
    if index_path.exists():
        index = read_json(index_path, INDEX_NAME)
        weight_map = index.get("weight_map")
        if not (isinstance(weight_map, dict) and weight_map
                and all(isinstance(v, str) for v in weight_map.values())):
            raise DrafterInputError(f"{index_path}: no usable weight_map",
                                    wanted='"weight_map": {"tensor name": "file.safetensors", ...}',
                                    found=str(weight_map)[:120])
        names = sorted(set(weight_map.values()))
        for name in names:
            # The index is data we did not write: a name like "../x" must not make us
            # read (or later write) outside the folder.
            if Path(name).name != name or not name.endswith(".safetensors"):
                raise DrafterInputError(f"{index_path}: shard name {name!r} is not a file in the folder",
                                        wanted="a plain *.safetensors file name", found=repr(name))
        paths = [folder / n for n in names]
    else:
        paths = sorted(folder.glob("*.safetensors"))
        if len(paths) > 1:
            raise DrafterInputError(f"{folder}: several .safetensors files and no {INDEX_NAME}",
                                    wanted=f"one file, or shards listed in {INDEX_NAME}",
                                    found=", ".join(p.name for p in paths),
                                    hint="the engines load files by the index; remove strays or add the index")
    if not paths:
        raise DrafterInputError(f"{folder}: no .safetensors file", wanted="model.safetensors or shards + index",
                                found="none", hint="only safetensors checkpoints are supported")
    for p in paths:
        if not p.is_file():
            raise DrafterInputError(f"{p}: shard listed in {INDEX_NAME} is missing",
                                    wanted="every file the index names", found="no such file")
    headers = tuple(read_header(p) for p in paths)
    tensors: dict[str, TensorInfo] = {}
    file_of: dict[str, Path] = {}
    for header in headers:
        for name, info in header.tensors.items():
            if name in tensors:
                raise DrafterInputError(f"{folder}: tensor {name!r} is stored twice",
                                        wanted="each tensor in exactly one file",
                                        found=f"in {file_of[name].name} and {header.path.name}")
            tensors[name] = info
            file_of[name] = header.path
    if index is not None:
        _check_index_matches(index_path, index["weight_map"], file_of)
    return Checkpoint(folder=folder, config=config, files=headers, tensors=tensors,
                      file_of=file_of, index=index)


def _check_index_matches(index_path: Path, weight_map: dict[str, str], file_of: dict[str, Path]) -> None:
    # Engines iterate the files and trust neither side fully; a disagreement means a
    # tensor some loader will not find, or will find in the wrong place.
    for name, fname in weight_map.items():
        if name not in file_of:
            raise DrafterInputError(f"{index_path}: tensor {name!r} is listed but not stored",
                                    wanted=f"{name!r} in {fname}", found="absent from every shard")
        if file_of[name].name != fname:
            raise DrafterInputError(f"{index_path}: tensor {name!r} is in another shard than listed",
                                    wanted=fname, found=file_of[name].name)
    extra = sorted(set(file_of) - set(weight_map))
    if extra:
        raise DrafterInputError(f"{index_path}: {len(extra)} stored tensor(s) missing from the index",
                                wanted="every stored tensor in weight_map", found=", ".join(extra[:5]))
