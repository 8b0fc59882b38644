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


#: Largest payload an IDX header may declare (Fashion-MNIST's largest file holds 47 MB).
MAX_IDX_BYTES = 1 << 33


def _read(f, n: int, path: Path, what: str) -> bytes:
    """Exactly ``n`` bytes of ``f`` (ValueError naming the file when fewer are left)."""
    try:
        data = f.read(n)
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: corrupt gzip data ({err})") from err
    if len(data) != n:
        raise ValueError(f"{path}: truncated IDX {what} ({len(data)} of {n} bytes)")
    return data


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in an IDX file (raw or gzip), in native byte order.

    The header is read first and the payload only up to the size it declares: a file with
    more data than its header declares (a decompression bomb, or a concatenation) is refused
    after reading one byte past it, never inflated whole. Raises ValueError naming the file
    when the magic number, type code, size or length is wrong.
    """
    path = Path(path)
    with open(path, "rb") as raw:
        gz = raw.read(2) == _GZIP_MAGIC
        raw.seek(0)
        f = gzip.GzipFile(fileobj=raw) if gz else raw
        head = _safe_read(f, 4, path)
        if len(head) < 4 or head[0] != 0 or head[1] != 0:
            raise ValueError(f"{path}: not an IDX file (the magic number must start with two "
                             "zero bytes)")
        code, ndim = head[2], head[3]
        if code not in IDX_TYPES:
            raise ValueError(f"{path}: unknown IDX type code 0x{code:02x}; allowed: "
                             + ", ".join(f"0x{c:02x}" for c in IDX_TYPES))
        dims = _read(f, 4 * ndim, path, f"header ({ndim} dimensions declared)")
        shape = tuple(int(s) for s in np.frombuffer(dims, dtype=">u4", count=ndim))
        dtype = IDX_TYPES[code]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        nbytes = count * dtype.itemsize
        if nbytes > MAX_IDX_BYTES:
            raise ValueError(f"{path}: the IDX header declares {shape} of {dtype.str}, "
                             f"{nbytes} bytes; at most {MAX_IDX_BYTES} are read")
        body = _read(f, nbytes, path, f"data (header {shape} with type {dtype.str})")
        if _safe_read(f, 1, path):
            raise ValueError(f"{path}: more data than the IDX header {shape} with type "
                             f"{dtype.str} declares ({4 + 4 * ndim + nbytes} bytes)")
    data = np.frombuffer(body, dtype=dtype, count=count)
    return data.astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def _safe_read(f, n: int, path: Path) -> bytes:
    """Up to ``n`` bytes of ``f``; a corrupt gzip stream is a ValueError naming the file."""
    try:
        return f.read(n)
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: corrupt gzip data ({err})") from err


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
