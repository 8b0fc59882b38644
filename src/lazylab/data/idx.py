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
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

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


#: Largest payload an IDX header may declare: 1 GiB, 20 times Fashion-MNIST's largest file
#: (47 MB of training images).
_MAX_IDX_BYTES = 1 << 30

#: Deflate cannot expand its input more than 1032 times (a 258-byte match per 2-bit code), so
#: a gzip file declaring more data than this many times its own size is truncated for sure.
MAX_GZIP_RATIO = 1032

#: Bytes decompressed per read: what is allocated follows the data actually present.
_CHUNK = 1 << 24


@dataclass(frozen=True)
class IdxHeader:
    """What an IDX file's header declares: ``shape`` of ``dtype`` (big-endian), gzip or raw,
    the header length and the file's size on disk."""

    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    gz: bool
    header_bytes: int
    file_bytes: int

    @property
    def count(self) -> int:
        """Number of values declared (the product of ``shape``; 1 for a scalar)."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        """Payload bytes declared."""
        return self.count * self.dtype.itemsize


def _read(f: BinaryIO, n: int, path: Path, what: str) -> bytes:
    """Exactly ``n`` bytes of ``f`` (ValueError naming the file when fewer are left)."""
    data = _safe_read(f, n, path)
    if len(data) != n:
        raise ValueError(f"{path}: truncated IDX {what} ({len(data)} of {n} bytes)")
    return data


def _open(raw: BinaryIO) -> tuple[BinaryIO, bool]:
    """The decompressed stream of an open file, and whether it is gzip (from the magic)."""
    gz = raw.read(2) == _GZIP_MAGIC
    raw.seek(0)
    return (gzip.GzipFile(fileobj=raw) if gz else raw), gz  # type: ignore[return-value]


def _parse_header(f: BinaryIO, path: Path, gz: bool, file_bytes: int) -> IdxHeader:
    """Read and check the header: magic, type code, and a declared size that the file can
    hold (1 GiB at most; a raw file's size; :data:`MAX_GZIP_RATIO` times a gzip's)."""
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
    h = IdxHeader(path, shape, IDX_TYPES[code], gz, 4 + 4 * ndim, file_bytes)
    declared = f"the IDX header declares {shape} of {h.dtype.str}, {h.nbytes} bytes"
    if h.nbytes > _MAX_IDX_BYTES:
        raise ValueError(f"{path}: {declared}; at most {_MAX_IDX_BYTES} are read")
    if not gz and h.header_bytes + h.nbytes > file_bytes:
        raise ValueError(f"{path}: truncated IDX data: {declared}, but the file holds "
                         f"{file_bytes - h.header_bytes}")
    if gz and h.header_bytes + h.nbytes > MAX_GZIP_RATIO * file_bytes:
        raise ValueError(f"{path}: truncated IDX data: {declared}, more than a gzip file of "
                         f"{file_bytes} bytes can hold (deflate expands at most "
                         f"{MAX_GZIP_RATIO} times)")
    return h


def read_idx_header(path: str | Path) -> IdxHeader:
    """The checked header of an IDX file (raw or gzip), without reading its data: callers
    compare the shapes of related files (images and labels) before anything is allocated."""
    path = Path(path)
    with open(path, "rb") as raw:
        f, gz = _open(raw)
        return _parse_header(f, path, gz, os.fstat(raw.fileno()).st_size)


def _read_body(f: BinaryIO, h: IdxHeader) -> bytearray:
    """The declared payload, decompressed in chunks: memory grows with the data actually
    present, so a header that declares more than the file holds fails early and cheaply."""
    body = bytearray()
    while len(body) < h.nbytes:
        chunk = _safe_read(f, min(_CHUNK, h.nbytes - len(body)), h.path)
        if not chunk:
            raise ValueError(f"{h.path}: truncated IDX data (header {h.shape} with type "
                             f"{h.dtype.str}; {len(body)} of {h.nbytes} bytes)")
        body += chunk
    return body


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in an IDX file (raw or gzip), in native byte order.

    The header is checked first (:func:`read_idx_header`), then the payload is read in chunks
    up to the size it declares: a file with less data fails as soon as it ends, and a file
    with more (a decompression bomb, or a concatenation) is refused after reading one byte
    past it, never inflated whole. Raises ValueError naming the file when the magic number,
    type code, size or length is wrong.
    """
    path = Path(path)
    with open(path, "rb") as raw:
        f, gz = _open(raw)
        h = _parse_header(f, path, gz, os.fstat(raw.fileno()).st_size)
        body = _read_body(f, h)
        if _safe_read(f, 1, path):
            raise ValueError(f"{path}: more data than the IDX header {h.shape} with type "
                             f"{h.dtype.str} declares ({h.header_bytes + h.nbytes} bytes)")
    data = np.frombuffer(body, dtype=h.dtype, count=h.count)
    if h.dtype.itemsize > 1:  # one-byte types have no byte order: the buffer is used as is
        data = data.astype(h.dtype.newbyteorder("="), copy=True)
    return data.reshape(h.shape)


def _safe_read(f: BinaryIO, n: int, path: Path) -> bytes:
    """Up to ``n`` bytes of ``f``; a corrupt gzip stream is a ValueError naming the file."""
    try:
        return f.read(n)
    except (OSError, EOFError, gzip.BadGzipFile) as err:
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
