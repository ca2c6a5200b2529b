"""Read a PyTorch state dict saved in the legacy (pre-1.6, non-zip) format into NumPy arrays.

The offline MobileNetV2 weights are such a file. Loading them with torch would add a
deep-learning runtime of several hundred MB to every worker for one 14 MB file, so this
reads the format directly: a pickle whose tensors refer to storages by key, followed by
each storage's raw little-endian bytes. Only tensors and plain containers are accepted:
any other class in the pickle is refused, so a crafted file cannot run code.
"""

from __future__ import annotations

import collections
import pickle
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

_MAGIC = 0x1950A86A20F9469CFC6C
_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class TorchFileError(ValueError):
    pass


@dataclass
class _StorageType:
    name: str


@dataclass
class _Tensor:
    key: str
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor_v2(storage: Any, offset: int, size: Sequence[int], stride: Sequence[int], *_rest: Any) -> _Tensor:
    return _Tensor(storage, int(offset), tuple(size), tuple(stride))


class _Unpickler(pickle.Unpickler):
    def __init__(self, f: BinaryIO, storages: dict[str, tuple[str, int]]) -> None:
        super().__init__(f)
        self.storages = storages

    def find_class(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor_v2
        if module == "torch" and name in _DTYPES:
            return _StorageType(name)
        raise TorchFileError(f"refusing to load {module}.{name}: only tensors and dicts are allowed")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise TorchFileError(f"unsupported persistent id {pid!r:.80}")
        storage_type, key, _location, numel = pid[1], pid[2], pid[3], pid[4]
        if not isinstance(storage_type, _StorageType):
            raise TorchFileError("unexpected storage type")
        self.storages[key] = (storage_type.name, int(numel))
        return key


def load_state_dict(path: str) -> dict[str, np.ndarray]:
    """Parameter name -> array (float32 stays float32), refusing anything but tensors."""
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head[:2] == b"PK":
            raise TorchFileError(f"{path}: zip-format checkpoint; only the legacy format is read here")
        if pickle.Unpickler(f).load() != _MAGIC:
            raise TorchFileError(f"{path}: not a PyTorch legacy checkpoint (bad magic number)")
        _protocol = pickle.Unpickler(f).load()
        sys_info = pickle.Unpickler(f).load()
        if not isinstance(sys_info, dict) or not sys_info.get("little_endian", True):
            raise TorchFileError(f"{path}: big-endian checkpoints are not supported")
        storages: dict[str, tuple[str, int]] = {}
        result = _Unpickler(f, storages).load()
        keys = pickle.Unpickler(f).load()
        data: dict[str, np.ndarray] = {}
        for key in keys:
            name, numel = storages[key]
            dtype = np.dtype(_DTYPES[name])
            (count,) = struct.unpack("<q", f.read(8))
            if count != numel:
                raise TorchFileError(f"{path}: storage {key} holds {count} elements, expected {numel}")
            raw = f.read(count * dtype.itemsize)
            if len(raw) != count * dtype.itemsize:
                raise TorchFileError(f"{path}: truncated at storage {key}")
            data[key] = np.frombuffer(raw, dtype=dtype)
    if not isinstance(result, dict):
        raise TorchFileError(f"{path}: not a state dict")
    out: dict[str, np.ndarray] = {}
    for name, t in result.items():
        if not isinstance(t, _Tensor):
            continue  # e.g. num_batches_tracked scalars saved as plain ints
        flat = data[t.key]
        item = flat.dtype.itemsize
        arr = np.lib.stride_tricks.as_strided(
            flat[t.offset :], shape=t.size, strides=tuple(s * item for s in t.stride), writeable=False
        )
        out[name] = np.ascontiguousarray(arr)
    return out
