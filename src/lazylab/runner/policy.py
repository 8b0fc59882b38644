"""The execution policy: how every work unit computes, applied by the runner everywhere.

Threads, determinism, matmul precision and the memory budget are part of the run's spec and are
applied identically in the main process, in every pool worker and in every Ray task, so a unit's
numbers do not depend on ``--workers``, on the backend, or on whether the run was resumed
(with ``cores // workers`` threads per worker, ``arora-spectrum`` differed in the last
digits between 1 and 2 workers). Experiments never call
``torch.set_num_threads``.

>>> p = ExecutionPolicy(threads=2)
>>> p.identity()["threads"], p.identity()["allow_tf32"]
(2, False)
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from lazylab.errors import InputError

#: cuBLAS needs a fixed workspace for deterministic GEMMs (CUDA docs, "Results reproducibility").
CUBLAS_WORKSPACE = ":4096:8"

#: Environment variable the blocked kernels read for their memory budget (lazylab.device).
BUDGET_ENV = "LAZYLAB_MEMORY_BUDGET"


#: The values of the one TF32 switch, ``--precision``: the experiment's declaration for the
#: scale (auto), float32, or TF32 on GPU GEMMs.
PRECISIONS = ("auto", "fp32", "tf32")


def check_precision(precision: str = "auto", *, allow_tf32: bool = False) -> str:
    """The TF32 switch in its one spelling, ``precision`` (one of :data:`PRECISIONS`).

    ``--allow-tf32`` on the command line and ``ExecutionPolicy(allow_tf32=True)`` passed to
    :func:`lazylab.runner.resolve_spec` are aliases of ``"tf32"`` (``allow_tf32``); with
    ``"fp32"`` they contradict each other. InputError (exit 2) for any other value.

    >>> check_precision("auto", allow_tf32=True), check_precision("fp32")
    ('tf32', 'fp32')
    """
    if precision not in PRECISIONS:
        raise InputError(f"--precision must be one of {', '.join(PRECISIONS)}; got "
                         f"{precision!r}")
    if allow_tf32 and precision == "fp32":
        raise InputError("--allow-tf32 and --precision fp32 exclude each other")
    return "tf32" if allow_tf32 else precision


def default_threads() -> int:
    """The default torch thread count: the CPU cores this process may use, at most 8.

    It depends on the machine, never on ``--workers``; it is recorded in ``config.json`` and in
    the identity of stored units, so a resume on a machine with another count is refused
    (pass ``--threads`` to match).
    """
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(8, n or 1))


@dataclass(frozen=True)
class ExecutionPolicy:
    """How units compute: torch threads, determinism, TF32, memory budget.

    Attributes
    ----------
    threads
        torch intra-op threads and numpy/scipy BLAS threads (:func:`limit_blas`) of every unit,
        in every process (fixed, never divided among workers: GEMM reductions split
        differently with another thread count); default :func:`default_threads`.
    deterministic
        ``torch.use_deterministic_algorithms(True, warn_only=True)`` and the cuBLAS workspace
        setting (``CUBLAS_WORKSPACE_CONFIG``).
    allow_tf32
        TF32 matmuls on Ampere+ GPUs (off by default: 10-bit mantissas change results).
    memory_budget
        Bytes the blocked kernels may use for one block (None: lazylab.device's default);
        exported as ``LAZYLAB_MEMORY_BUDGET``.
    """

    threads: int = field(default_factory=default_threads)
    deterministic: bool = True
    allow_tf32: bool = False
    memory_budget: int | None = None

    def identity(self) -> dict[str, Any]:
        """What stored results depend on (recorded in config.json and the resume identity).

        ``blas_threads`` records that numpy/scipy BLAS pools are capped at ``threads`` too
        (stores written before that cap computed with uncapped BLAS pools and lack the key, so
        resuming them is refused, naming the policy, rather than mixing the two)."""
        return {**asdict(self), "blas_threads": self.threads}

    def apply(self) -> None:
        """Apply the policy to this process (idempotent; call before any unit computes)."""
        import torch

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        if self.memory_budget is not None:
            os.environ[BUDGET_ENV] = str(int(self.memory_budget))
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        torch.use_deterministic_algorithms(self.deterministic, warn_only=True)
        torch.backends.cuda.matmul.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.benchmark = False
        torch.set_float32_matmul_precision("high" if self.allow_tf32 else "highest")
        limit_blas(self.threads)


def limit_blas(threads: int) -> None:
    """Cap the BLAS thread pools of numpy and scipy (OpenBLAS, MKL, BLIS) at ``threads``.

    torch's own pools follow ``torch.set_num_threads``; numpy's and scipy's BLAS would otherwise
    use every core in every worker (the policy's thread count must hold for all of them).
    numpy and scipy.linalg are imported first so that their BLAS libraries are loaded when the
    limit is applied (threadpoolctl only reaches libraries already loaded).
    """
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info, threadpool_limits

    if any(i["user_api"] == "blas" and i["num_threads"] != threads for i in threadpool_info()):
        threadpool_limits(limits=threads, user_api="blas")
