"""Hostile ``torch.save`` files, written by hand (zip members and pickle opcodes), so no test needs torch to make one.

``tensor_file`` writes what ``torch.save({name: tensor, ...})`` writes (protocol 2: ``<name>/data.pkl``,
``<name>/data/<key>``, ``<name>/byteorder``), with any shape, strides and storage a test asks for; the others
are the probes of issue #27: a large memo index, millions of deflated empty sets, stride-0 hooks, a dimension
of 2**70, a storage whose CRC is wrong, a list containing itself.
"""

from __future__ import annotations

import json
import pathlib
import struct
import zipfile


def _text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data  # BINUNICODE


def _int(value: int) -> bytes:
    data = value.to_bytes(value.bit_length() // 8 + 1, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data  # LONG1: any size


def _tuple(values) -> bytes:
    return b"(" + b"".join(_int(v) for v in values) + b"t"


def tensor(key: str, numel: int, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0,
           storage: str = "FloatStorage") -> bytes:
    """The pickle of one tensor, as ``torch._utils._rebuild_tensor_v2`` rebuilds it, over storage ``key``."""
    persistent = (b"(" + _text("storage") + b"ctorch\n" + storage.encode() + b"\n" + _text(key) + _text("cpu")
                  + _int(numel) + b"tQ")  # BINPERSID
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + persistent + _int(offset) + _tuple(shape) + _tuple(strides)
            + b"\x89ccollections\nOrderedDict\n)RtR")


def pickle_of(entries: dict[str, bytes], extra: bytes = b"") -> bytes:
    """A protocol-2 pickle of a dict of pickled values (``extra``: opcodes run before the dict is built)."""
    return b"\x80\x02" + extra + b"}(" + b"".join(_text(k) + v for k, v in entries.items()) + b"u."


def write(path: pathlib.Path, data_pkl: bytes, storages: dict[str, bytes] | None = None, *,
          compression: int = zipfile.ZIP_STORED) -> pathlib.Path:
    """A ``.pt`` archive holding ``data_pkl`` and the storages' bytes."""
    prefix = path.stem
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        archive.writestr(f"{prefix}/data.pkl", data_pkl)
        archive.writestr(f"{prefix}/byteorder", b"little")
        archive.writestr(f"{prefix}/version", b"3\n")
        for key, data in (storages or {}).items():
            archive.writestr(f"{prefix}/data/{key}", data)
    return path


def tensor_file(path: pathlib.Path, tensors: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] | None = None
                ) -> pathlib.Path:
    """A good file: each named float32 tensor ``(shape, strides)`` over a storage of its own, filled with 1.0."""
    tensors = tensors if tensors is not None else {"hook_embed": ((1, 4, 8), (32, 8, 1))}
    entries, storages = {}, {}
    for i, (name, (shape, strides)) in enumerate(tensors.items()):
        numel = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) if all(shape) else 1
        entries[name] = tensor(str(i), numel, shape, strides)
        storages[str(i)] = struct.pack("<f", 1.0) * numel
    return write(path, pickle_of(entries), storages)


def memo_index(path: pathlib.Path, index: int = 2**27) -> pathlib.Path:
    """A 259-byte file whose pickle puts its dict at memo slot ``index`` (the unpickler sizes its memo by it)."""
    return write(path, b"\x80\x02}r" + struct.pack("<I", index) + b".")


def empty_sets(path: pathlib.Path, count: int = 5_000_000) -> pathlib.Path:
    """A few KB deflated: a pickle of ``count`` empty sets (protocol 4's EMPTY_SET), then an empty dict."""
    return write(path, b"\x80\x04" + b"\x8f" * count + b"}.", compression=zipfile.ZIP_DEFLATED)


def stride_zero(path: pathlib.Path, hooks: int = 16, side: int = 4096) -> pathlib.Path:
    """``hooks`` tensors of ``side`` x ``side`` float32 (64 MB each at 4096), all one element repeated (stride 0)."""
    entries = {f"blocks.{i}.hook_resid_post": tensor(str(i), 1, (1, side, side), (0, 0, 0)) for i in range(hooks)}
    return write(path, pickle_of(entries), {str(i): struct.pack("<f", 1.0) for i in range(hooks)})


def huge_dimension(path: pathlib.Path) -> pathlib.Path:
    """A tensor of shape (0, 2**70): no elements, but a dimension no array can have."""
    return write(path, pickle_of({"hook_embed": tensor("0", 1, (0, 2**70), (1, 1))}), {"0": b"\x00" * 4})


def bad_crc(path: pathlib.Path, tensors: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] | None = None
            ) -> pathlib.Path:
    """A good file (``tensor_file``'s) whose first storage's bytes were changed after the archive recorded their
    CRC."""
    tensor_file(path, tensors)
    raw = bytearray(path.read_bytes())
    at = raw.find(struct.pack("<f", 1.0) * 32)
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))
    return path


def self_containing(path: pathlib.Path) -> pathlib.Path:
    """A good tensor beside a list that contains itself (``loop = []; loop.append(loop)``)."""
    loop = b"]q\x63h\x63a"  # EMPTY_LIST, BINPUT 99, BINGET 99, APPEND
    entries = {"hook_embed": tensor("0", 32, (1, 4, 8), (32, 8, 1)), "loop": loop}
    return write(path, pickle_of(entries), {"0": struct.pack("<f", 1.0) * 32})


def mixed_capture(folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """A capture folder of six steps: good files at capture steps 0 and 3 (``blocks.0.hook_resid_post`` and
    ``blocks.0.attn.hook_pattern``), a hostile one at each other step; returns the files by builder name."""
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps({"model_name": "m", "num_steps": 6, "step_metadata": []}))
    good = {"blocks.0.hook_resid_post": ((1, 4, 8), (32, 8, 1)),
            "blocks.0.attn.hook_pattern": ((1, 2, 4, 4), (32, 16, 4, 1))}
    files = {}
    for step, name in enumerate(("good0", "huge_dimension", "bad_crc", "good3", "self_containing", "stride_zero")):
        path = folder / f"step_{step:04d}.pt"
        if name.startswith("good"):
            files[name] = tensor_file(path, good)
        elif name == "bad_crc":
            files[name] = bad_crc(path, good)
        else:
            files[name] = globals()[name](path)
    return files
