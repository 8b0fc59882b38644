"""Reader (and writer, for tests and tools) of the IDX format of MNIST and Fashion-MNIST.

An IDX file is: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
0x0D float32, 0x0E float64), the number of dimensions k, then k big-endian uint32 sizes, then
the data in big-endian C order (LeCun et al., http://yann.lecun.com/exdb/mnist/). Files may be
gzip-compressed; compression is detected from the content, not the name.

Example
-------
>>> import numpy as np, tempfile, pathlib
>>> from lazylab.data.idx import read_idx, write_idx
>>> p = pathlib.Path(tempfile.mkdtemp()) / "x-idx3-ubyte.gz"
>>> write_idx(p, np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
>>> read_idx(p).shape
(2, 3, 4)
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

__all__ = ["IDX_TYPES", "read_idx", "write_idx"]

#: IDX type code -> big-endian numpy dtype.
IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise ValueError(f"{path}: corrupt gzip data ({err})") from err
    return raw


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in an IDX file (raw or gzip), in native byte order.

    Raises ValueError naming the file when the magic number, type code or length is wrong.
    """
    path = Path(path)
    raw = _read_bytes(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (the magic number must start with two zero "
                         "bytes)")
    code, ndim = raw[2], raw[3]
    if code not in IDX_TYPES:
        raise ValueError(f"{path}: unknown IDX type code 0x{code:02x}; allowed: "
                         + ", ".join(f"0x{c:02x}" for c in IDX_TYPES))
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header ({ndim} dimensions declared)")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_TYPES[code]
    count = int(np.prod(shape, dtype=np.int64))
    expected = header + count * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(f"{path}: IDX data has {len(raw)} bytes; the header {shape} with type "
                         f"{dtype.str} implies {expected}")
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=header)
    return data.astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def write_idx(path: str | Path, array: np.ndarray, *, compress: bool | None = None) -> None:
    """Write ``array`` as an IDX file; gzip when ``compress`` (default: name ends in .gz)."""
    path = Path(path)
    arr = np.asarray(array)
    code = next((c for c, dt in IDX_TYPES.items() if dt.newbyteorder("=") == arr.dtype), None)
    if code is None:
        raise ValueError(f"array dtype must be one of uint8, int8, int16, int32, float32, "
                         f"float64; got {arr.dtype}")
    if arr.ndim > 255:
        raise ValueError(f"array must have at most 255 dimensions; got {arr.ndim}")
    body = (bytes([0, 0, code, arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
            + arr.astype(IDX_TYPES[code], copy=False).tobytes(order="C"))
    if compress is None:
        compress = path.suffix == ".gz"
    path.write_bytes(gzip.compress(body) if compress else body)
