"""Read the tensors of a ``torch.save`` file without torch and without running anything the file asks for.

A ``.pt`` file written by ``torch.save`` (torch >= 1.6) is a zip archive: ``<name>/data.pkl`` (a pickle of the
saved object, whose tensors refer to storages by key), ``<name>/data/<key>`` (each storage's raw bytes) and
``<name>/byteorder``. Unpickling runs whatever the pickle names, so this reader never unpickles freely:
``find_class`` answers only for ``collections.OrderedDict``, ``torch._utils._rebuild_tensor_v2`` and the typed
storage classes (``torch.FloatStorage``, ...), each replaced by an inert stand-in; anything else (``os.system``,
``builtins.eval``, a class of some other library) stops the read with :class:`UnsafeFileError` before it is
called. Tensors come back as :class:`TensorRef` (dtype, shape, where its data lie) and become numpy arrays only
when asked, so listing a file's hooks reads its pickle alone.

Bounds (constants below, so a file of a few bytes cannot ask for gigabytes or crash its reader):

- the pickle is at most ``MAX_PICKLE_BYTES`` once inflated (its declared size and the bytes actually inflated,
  read with a cap); before anything is unpickled its opcodes are walked (``pickletools.genops``, which runs
  nothing): at most ``MAX_OBJECTS`` of them, and memo indices (which size the unpickler's memo table) below
  ``MAX_MEMO``;
- a storage may not claim more bytes than the file holds, nor more than its own archive member, and is read with
  a cap of exactly its size (a deflated member cannot inflate past it);
- a tensor's offset, shape and strides must stay inside its storage, with dimensions below ``MAX_EXTENT``;
- what the whole file may materialize, its storages plus every tensor as an array (a stride-0 or broadcast view
  counted by the elements it materializes, bfloat16 at 4 bytes), is at most ``MAX_EXPANSION`` times the file's
  size plus ``EXPANSION_FLOOR``; a file asking for more is refused as a whole;
- the saved object is walked without recursion, once per object (a list containing itself is read once).

A tensor may be a view into a larger or shared storage (``torch.save`` keeps views as views): offsets and strides
are honoured, and several tensors of one file share a storage read once. Every failure of a bad file (a damaged
archive, a bad CRC, a pickle that cannot be decoded) is a :class:`PtFileError` naming the file and the reason.

bfloat16 has no numpy dtype: it is widened to float32 exactly (its bits are the top half of a float32).
"""

from __future__ import annotations

import collections
import dataclasses
import io
import math
import os
import pickle
import pickletools
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

# The largest data.pkl read, inflated (a capture's pickle is a few KB: names, shapes and storage keys, no data).
MAX_PICKLE_BYTES = 16 * 1024 * 1024
# The most opcodes a pickle may hold: each builds at most one object (a capture's step file: ~25 per hook).
MAX_OBJECTS = 1_000_000
# The largest memo index (and so memo size) a pickle may use: the unpickler sizes its memo table by the index.
MAX_MEMO = 1_000_000
# The most members an archive may list (a capture's step file has one storage per hook, ~40 to a few hundred).
MAX_MEMBERS = 100_000
MAX_DIMS = 64
# The largest size or stride of one dimension (numpy's arrays index with 64-bit integers; no activation is near).
MAX_EXTENT = 2**40
# What one file may materialize in total (its storages, then each tensor as an array): this many times its size
# plus EXPANSION_FLOOR. A tensor may repeat its storage's elements (stride 0, as ``expand`` makes) and bfloat16
# widens to float32, so a real capture needs up to ~3x; a few bytes of pickle cannot ask for gigabytes.
MAX_EXPANSION = 4
EXPANSION_FLOOR = 16 * 1024 * 1024


_L = TypeVar("_L")


class PtFileError(ValueError):
    """A ``.pt`` file that cannot be read; the message names the file and the reason."""


class UnsafeFileError(PtFileError):
    """A ``.pt`` file whose pickle asks for something other than tensors and dicts; nothing of it was run."""


@dataclasses.dataclass(frozen=True, slots=True)
class _StorageType:
    """Stand-in for ``torch.FloatStorage`` and its kin: only the element type."""

    name: str
    dtype: np.dtype


# torch's typed storage classes and the numpy type of their elements (little-endian; byteorder says otherwise).
_STORAGES: dict[str, str] = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "BFloat16Storage": "<u2",  # widened to float32 on read
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}


@dataclasses.dataclass(frozen=True, slots=True)
class StorageRef:
    """One storage of the archive: its key (``data/<key>``), element type and number of elements."""

    key: str
    kind: _StorageType
    numel: int

    @property
    def nbytes(self) -> int:
        return self.numel * self.kind.dtype.itemsize


@dataclasses.dataclass(frozen=True, slots=True)
class TensorRef:
    """A tensor of the file, not yet read: its storage and the view (offset, shape, strides in elements)."""

    storage: StorageRef
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def dtype(self) -> str:
        """The tensor's element type as torch names it (``float32``, ``bfloat16``, ...)."""
        return _TORCH_NAMES[self.storage.kind.name]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


_TORCH_NAMES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool",
}


def _rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> TensorRef:
    """Stand-in for ``torch._utils._rebuild_tensor_v2``: records the view, reads nothing."""
    if not isinstance(storage, StorageRef):
        raise UnsafeFileError(f"a tensor's storage is a {type(storage).__name__}, not a storage")
    if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride) <= MAX_DIMS):
        raise PtFileError(f"a tensor has shape {str(size)[:120]} and strides {str(stride)[:120]}")
    if not all(_count(v) and v < MAX_EXTENT for v in (storage_offset, *size, *stride)):
        raise PtFileError(f"a tensor has offset {storage_offset!r}, shape {str(size)[:120]}, strides "
                          f"{str(stride)[:120]} (each a count below {MAX_EXTENT:,})")
    if math.prod(max(n, 1) for n in size) >= MAX_EXTENT:
        raise PtFileError(f"a tensor has shape {list(size)}, whose dimensions multiply past {MAX_EXTENT:,}")
    ref = TensorRef(storage, storage_offset, size, stride)
    if ref.numel:
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        if last >= storage.numel:
            raise PtFileError(
                f"a tensor of shape {list(size)} (offset {storage_offset}, strides {list(stride)}) reaches element "
                f"{last} of a storage of {storage.numel}")
    return ref


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the names a tensor dict needs, each to an inert stand-in."""

    def __init__(self, data: bytes, *, file_size: int, where: str) -> None:
        super().__init__(io.BytesIO(data))
        self._file_size = file_size
        self._where = where
        self._storages: dict[str, StorageRef] = {}
        self._budget = MAX_EXPANSION * file_size + EXPANSION_FLOOR
        self._materialized = 0

    def _take(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` more against what the file may materialize in total."""
        self._materialized += nbytes
        if self._materialized > self._budget:
            raise PtFileError(f"{self._where}: {what} brings what the file's tensors take in memory past "
                              f"{self._budget:,} bytes ({MAX_EXPANSION}x the file's {self._file_size:,} bytes plus "
                              f"{EXPANSION_FLOOR:,}); refused (stride-0 views count every element they repeat)")

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self._rebuild_tensor
        if module == "torch" and name in _STORAGES:
            return _StorageType(name, np.dtype(_STORAGES[name]))
        raise UnsafeFileError(f"{self._where}: the pickle asks for {module}.{name}, which a tensor file never needs; "
                              "refused without running it")

    def persistent_load(self, pid: Any) -> StorageRef:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise UnsafeFileError(f"{self._where}: a persistent id {str(pid)[:80]!r} that is not a storage")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not _count(numel):
            raise PtFileError(f"{self._where}: a storage record {str(pid)[:120]!r} is malformed")
        ref = StorageRef(key, kind, numel)
        if ref.nbytes > self._file_size:
            raise PtFileError(f"{self._where}: storage {key!r} claims {ref.nbytes:,} bytes, more than the whole file "
                              f"({self._file_size:,} bytes)")
        known = self._storages.setdefault(key, ref)
        if known != ref:
            raise PtFileError(f"{self._where}: storage {key!r} is declared twice with different sizes or types")
        if known is ref:
            self._take(ref.nbytes, f"storage {key!r}")
        return ref

    def _rebuild_tensor(self, *args: Any) -> TensorRef:
        try:
            tensor = _rebuild_tensor_v2(*args)
        except TypeError as exc:
            raise PtFileError(f"{self._where}: a tensor record is malformed ({exc})") from exc
        except PtFileError as exc:
            raise type(exc)(f"{self._where}: {exc}") from exc
        itemsize = 4 if tensor.storage.kind.name == "BFloat16Storage" else tensor.storage.kind.dtype.itemsize
        self._take(tensor.numel * itemsize, f"a tensor of shape {list(tensor.shape)}")
        return tensor


def _check_opcodes(data: bytes, where: str) -> None:
    """Walk a pickle's opcodes without running them: at most ``MAX_OBJECTS``, memo indices below ``MAX_MEMO``.

    The C unpickler grows its memo table to the largest index a pickle puts (8 bytes a slot), so one opcode of a
    few bytes could otherwise ask for gigabytes; and each opcode may build an object.
    """
    memo = 0
    for count, (opcode, arg, _pos) in enumerate(pickletools.genops(data), start=1):
        if count > MAX_OBJECTS:
            raise PtFileError(f"{where}: data.pkl holds more than {MAX_OBJECTS:,} pickle operations; a tensor file "
                              "needs a few per tensor")
        if opcode.name == "MEMOIZE":
            memo += 1
            index = memo
        elif opcode.name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo += 1
            index = arg if isinstance(arg, int) else MAX_MEMO
        else:
            continue
        if index >= MAX_MEMO or memo > MAX_MEMO:
            raise PtFileError(f"{where}: data.pkl puts memo entry {index:,} (at most {MAX_MEMO:,} are read)")


class PtFile:
    """One ``.pt`` file opened for reading: its object with :class:`TensorRef` leaves, arrays on demand.

    Args:
        path: the file.

    Raises:
        PtFileError: not a zip ``torch.save`` file, or a bound is broken.
        UnsafeFileError: the pickle asks for anything but tensors and dicts.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        try:
            self.size = os.path.getsize(self.path)
            with zipfile.ZipFile(self.path) as archive:
                infos = archive.infolist()
                if len(infos) > MAX_MEMBERS:
                    raise PtFileError(f"{self.path}: {len(infos):,} archive members, more than {MAX_MEMBERS:,}")
                self._members = {info.filename: info for info in infos}
                pickles = [name for name in self._members if name.endswith("/data.pkl") or name == "data.pkl"]
                if len(pickles) != 1:
                    raise PtFileError(f"{self.path}: not a torch.save file (found {len(pickles)} data.pkl members)")
                self._prefix = pickles[0][: -len("data.pkl")]
                data = self._member_bytes(archive, self._members[pickles[0]], MAX_PICKLE_BYTES, exact=False)
                order = self._members.get(self._prefix + "byteorder")
                self._big_endian = order is not None and self._member_bytes(archive, order, 16, exact=False
                                                                             ).strip() == b"big"
        except zipfile.BadZipFile as exc:
            raise PtFileError(f"{self.path}: not a torch.save zip archive ({exc}); files of torch < 1.6 are not "
                              "supported") from exc
        except OSError as exc:
            raise PtFileError(f"{self.path}: cannot read ({exc})") from exc
        try:
            _check_opcodes(data, self.path)
            self.obj = _RestrictedUnpickler(data, file_size=self.size, where=self.path).load()
        except PtFileError:
            raise
        except Exception as exc:  # a damaged pickle: any decoding error is the file's fault
            raise PtFileError(f"{self.path}: data.pkl cannot be read ({type(exc).__name__}: {exc})") from exc

    def _member_bytes(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, *, exact: bool) -> bytes:
        """A member's bytes, at most ``cap`` (by its declared size and by what actually inflates); ``exact``:
        exactly ``cap`` (a storage), the rest of the member unread. Any failure to inflate is the file's error."""
        name = info.filename
        if not exact and info.file_size > cap:
            raise PtFileError(f"{self.path}: {name} declares {info.file_size:,} bytes, more than {cap:,}")
        try:
            with archive.open(info) as member:
                data = member.read(cap if exact else cap + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError,
                ValueError) as exc:
            raise PtFileError(f"{self.path}: archive member {name} cannot be read ({type(exc).__name__}: "
                              f"{exc})") from exc
        if not exact and len(data) > cap:
            raise PtFileError(f"{self.path}: {name} inflates past {cap:,} bytes (it declares {info.file_size:,})")
        return data

    def tensors(self) -> dict[str, TensorRef]:
        """The file's tensors by name: the saved dict's keys (nested dicts joined with dots)."""
        return leaves(self.obj, TensorRef)

    def read(self, tensor: TensorRef, storages: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """One tensor as an owned numpy array (bfloat16 as float32).

        Args:
            tensor: a tensor of this file.
            storages: storages already read, by key (several tensors may share one); filled as it reads.
        """
        storages = {} if storages is None else storages
        ref = tensor.storage
        flat = storages.get(ref.key)
        if flat is None:
            flat = storages.setdefault(ref.key, self._storage(ref))
        itemsize = flat.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(flat[tensor.offset:] if tensor.numel else flat[:0],
                                               shape=tensor.shape,
                                               strides=tuple(s * itemsize for s in tensor.strides), writeable=False)
        array = np.array(view, dtype=view.dtype.newbyteorder("="), copy=True)
        if ref.kind.name == "BFloat16Storage":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return array

    def _storage(self, ref: StorageRef) -> np.ndarray:
        info = self._members.get(f"{self._prefix}data/{ref.key}")
        if info is None:
            raise PtFileError(f"{self.path}: storage {ref.key!r} is missing from the archive")
        if info.file_size < ref.nbytes:
            raise PtFileError(f"{self.path}: storage {ref.key!r} claims {ref.nbytes:,} bytes but its member holds "
                              f"{info.file_size:,}")
        try:
            with zipfile.ZipFile(self.path) as archive:
                raw = self._member_bytes(archive, info, ref.nbytes, exact=True)
        except (zipfile.BadZipFile, OSError) as exc:
            raise PtFileError(f"{self.path}: cannot read storage {ref.key!r} ({exc})") from exc
        if len(raw) < ref.nbytes:
            raise PtFileError(f"{self.path}: storage {ref.key!r} ends early ({len(raw):,} of {ref.nbytes:,} bytes)")
        dtype = ref.kind.dtype.newbyteorder(">" if self._big_endian else "<")
        return np.frombuffer(raw, dtype=dtype, count=ref.numel)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every tensor of the file as a numpy array (shared storages read once)."""
        storages: dict[str, np.ndarray] = {}
        return {name: self.read(ref, storages) for name, ref in self.tensors().items()}


def leaves(obj: Any, leaf: type[_L]) -> dict[str, _L]:
    """The ``leaf`` objects (tensors) of a saved object by dotted name (nested dicts' keys and list positions joined
    with dots), walked without recursion; each dict, list or tuple once (one that contains itself, or is shared,
    is listed where it is first met)."""
    found: dict[str, _L] = {}
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, leaf):
            found[name or "tensor"] = value
            continue
        if isinstance(value, Mapping):
            items = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            items = [(str(i), v) for i, v in enumerate(value)]
        else:
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        stack.extend((f"{name}.{key}" if name else key, child) for key, child in reversed(items))
    return found


def read(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every tensor of a ``torch.save`` file as numpy arrays, by name, read without torch."""
    return PtFile(path).arrays()
