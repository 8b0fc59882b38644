"""Block sizes from one memory budget, and the blocked row evaluation."""

from __future__ import annotations

import pytest
import torch

from lazylab.device import (
    CPU_BLOCK_BYTES,
    block_elems,
    blocked_rows,
    memory_budget,
    row_blocks,
    set_memory_budget,
)
from lazylab.kernels import ntk


def test_block_elems_follow_the_budget() -> None:
    assert block_elems("cpu") == CPU_BLOCK_BYTES // 8 == 1 << 25
    assert block_elems("cpu", itemsize=4) == 1 << 26
    assert block_elems("cpu", budget_bytes=100) == 12
    try:
        set_memory_budget(1 << 20)
        assert memory_budget("cpu") == 1 << 20 and block_elems("cpu") == 1 << 17
    finally:
        set_memory_budget(None)
    assert memory_budget("cpu") == CPU_BLOCK_BYTES
    with pytest.raises(ValueError, match="budget_bytes"):
        set_memory_budget(0)
    with pytest.raises(ValueError, match="itemsize"):
        block_elems("cpu", itemsize=0)


def test_row_blocks_cover_the_rows_within_the_budget() -> None:
    blocks = row_blocks(1003, 17, "cpu", budget_bytes=8 * 17 * 100)
    assert [b.stop - b.start for b in blocks] == [100] * 10 + [3]
    assert blocks[0].start == 0 and blocks[-1].stop == 1003
    assert row_blocks(5, 10**9, "cpu") == [slice(i, i + 1) for i in range(5)]


def test_blocked_rows_equal_one_call() -> None:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(50, 4, generator=g, dtype=torch.float64)
    Z = torch.randn(30, 4, generator=g, dtype=torch.float64)
    full = ntk(X, Z)
    # 4 scratch entries x 30 columns x 8 bytes x 7 rows per block: 8 blocks
    out = blocked_rows(lambda A, B: ntk(A, B), X, Z, budget_bytes=4 * 30 * 8 * 7)
    torch.testing.assert_close(out, full, rtol=1e-13, atol=1e-13)
    one = blocked_rows(lambda A, B: ntk(A, B), X, Z, out_dtype=torch.float32)
    assert one.dtype == torch.float32 and torch.equal(one, full.float())
