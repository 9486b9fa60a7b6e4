"""safetensors_py.py -- a small, self-contained safetensors reader and writer
(numpy only), for tools/gpt2_reference.py and bench/gpt2/torch_step.py.

Format: an 8-byte little-endian header length N, N bytes of JSON
    {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
     "__metadata__": {str: str}}
(padded with spaces to a multiple of 8), then the raw little-endian data;
offsets are relative to the first byte after the header.

    save(path, {name: numpy array}, metadata={str: str})
    tensors, metadata = load(path)      # {name: numpy array}, {str: str}

Reads F64, F32, F16, BF16 (returned as float32), I64, I32, I16, I8, U8 and
BOOL; writes every numpy dtype of that list except BF16. Problems with a
file raise SafetensorsError with a message naming the file and the tensor.
"""

import json
import os
import struct

import numpy as np

__all__ = ["SafetensorsError", "save", "load", "read_header"]

# safetensors dtype name -> numpy little-endian dtype (BF16 handled apart)
_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
          "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
_FROM_NUMPY = {np.dtype(v).str.replace("|", "").lstrip("<"): k for k, v in _DTYPES.items()}

# a header larger than this is certainly corrupt (the reference caps it at 100 MB)
_MAX_HEADER = 100 * 1024 * 1024


class SafetensorsError(Exception):
    pass


def _dtype_name(arr):
    key = np.dtype(arr.dtype).newbyteorder("<").str.replace("|", "").lstrip("<")
    name = _FROM_NUMPY.get(key)
    if name is None:
        raise SafetensorsError("cannot store numpy dtype %s in safetensors" % arr.dtype)
    return name


def save(path, tensors, metadata=None):
    """Write {name: array} (numpy arrays, or anything np.asarray accepts) and
    the metadata {str: str} to path, atomically (temporary file + rename)."""
    header = {}
    if metadata:
        md = {}
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError("metadata must map str to str (%r: %r)" % (k, v))
            md[k] = v
        header["__metadata__"] = md
    blobs = []
    offset = 0
    for name, value in tensors.items():
        if name == "__metadata__":
            raise SafetensorsError("'__metadata__' is not a valid tensor name")
        arr = np.asarray(value)
        dt = _dtype_name(arr)
        data = np.ascontiguousarray(arr, dtype=np.dtype(_DTYPES[dt])).tobytes()
        header[name] = {"dtype": dt, "shape": [int(s) for s in arr.shape],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(hjson)))
            f.write(hjson)
            for b in blobs:
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_header(path):
    """(header dict without __metadata__, metadata dict, data start offset)."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise SafetensorsError("%s: cannot open: %s" % (path, e.strerror)) from None
    with f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError("%s: not a safetensors file (shorter than 8 bytes)" % path)
        (n,) = struct.unpack("<Q", raw)
        size = os.fstat(f.fileno()).st_size
        if n > _MAX_HEADER or 8 + n > size:
            raise SafetensorsError("%s: corrupt header length %d (file is %d bytes)" % (path, n, size))
        hraw = f.read(n)
    try:
        header = json.loads(hraw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise SafetensorsError("%s: header is not valid JSON: %s" % (path, e)) from None
    if not isinstance(header, dict):
        raise SafetensorsError("%s: header is not a JSON object" % path)
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise SafetensorsError("%s: __metadata__ must map strings to strings" % path)
    data_size = size - 8 - n
    for name, info in header.items():
        try:
            dt = info["dtype"]
            shape = [int(s) for s in info["shape"]]
            b, e = (int(x) for x in info["data_offsets"])
        except (TypeError, KeyError, ValueError):
            raise SafetensorsError("%s: tensor %r: malformed entry %r" % (path, name, info)) from None
        if dt not in _SIZES:
            raise SafetensorsError("%s: tensor %r: unsupported dtype %r" % (path, name, dt))
        count = 1
        for s in shape:
            if s < 0:
                raise SafetensorsError("%s: tensor %r: negative dimension in %r" % (path, name, shape))
            count *= s
        if not (0 <= b <= e <= data_size) or e - b != count * _SIZES[dt]:
            raise SafetensorsError(
                "%s: tensor %r: data_offsets [%d, %d] do not fit dtype %s shape %r "
                "in %d bytes of data" % (path, name, b, e, dt, shape, data_size))
    return header, metadata, 8 + n


def load(path, names=None):
    """({name: numpy array}, metadata). BF16 comes back as float32; names,
    when given, restricts what is read (a missing name raises)."""
    header, metadata, start = read_header(path)
    if names is not None:
        missing = [n for n in names if n not in header]
        if missing:
            raise SafetensorsError("%s: missing tensor(s): %s" % (path, ", ".join(missing)))
        wanted = list(names)
    else:
        wanted = list(header)
    out = {}
    with open(path, "rb") as f:
        for name in wanted:
            info = header[name]
            b, e = info["data_offsets"]
            f.seek(start + b)
            raw = f.read(e - b)
            if len(raw) != e - b:
                raise SafetensorsError("%s: tensor %r: truncated data" % (path, name))
            shape = tuple(int(s) for s in info["shape"])
            if info["dtype"] == "BF16":
                u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                arr = u.view(np.float32).reshape(shape)
            else:
                arr = np.frombuffer(raw, dtype=np.dtype(_DTYPES[info["dtype"]])).reshape(shape)
                arr = arr.astype(arr.dtype.newbyteorder("="), copy=True)
            out[name] = arr
    return out, metadata
