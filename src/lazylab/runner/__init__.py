"""Scheduling: run an experiment's grid of work units, store each as it finishes, assemble.

The package splits the runner by concept:

* :mod:`~lazylab.runner.spec`: :class:`RunSpec` (what to run, and the identity of its stored
  units), :class:`WorkUnit`, :func:`plan_units`;
* :mod:`~lazylab.runner.params`: ``--set`` coercion and validation messages,
  :func:`resolve_spec` (which also calls the experiment's ``validate``);
* :mod:`~lazylab.runner.policy`: the execution policy (threads, determinism, TF32, memory) and
  :func:`check_precision`, the one check of the TF32 switch (``--precision``; ``--allow-tf32``
  and ``ExecutionPolicy(allow_tf32=True)`` are its aliases);
* :mod:`~lazylab.runner.job`, :mod:`~lazylab.runner.serial`, :mod:`~lazylab.runner.pool`,
  :mod:`~lazylab.runner.ray_backend`, :mod:`~lazylab.runner.backends`: the backends behind one
  protocol;
* :mod:`~lazylab.runner.lock`: the output-folder lock (the cost guard, ``estimate`` and
  ``check_cost``, is :mod:`lazylab.experiments.cost`);
* :mod:`~lazylab.runner.orchestrate`: :func:`run_experiment`, one experiment end to end;
* :mod:`~lazylab.runner.preflight`: what would stop a run later (output paths, locks, a
  resume's identity), checked before any unit computes;
* :mod:`~lazylab.runner.many`: :func:`run_many`, several experiments into one folder, and the
  :class:`RunSummary` (outcomes, failures, stops, exit code) that ``lazylab reproduce`` renders;
* :mod:`~lazylab.runner.assemble`: a run's stored units into results, claims and figure
  (shared by a run's end and ``lazylab report``'s rebuild);
* :mod:`~lazylab.runner.outputs`: the output files, written atomically;
* :mod:`~lazylab.runner.provenance`: the environment, revision and reproduce command a run
  records. Rendering the reports is :mod:`lazylab.report`'s job.

Errors live in :mod:`lazylab.errors` (re-exported here for compatibility).
"""

from __future__ import annotations

from lazylab.errors import DataNotFound, InputError, LazylabError, StoreFault, UnitFailed
from lazylab.runner.backends import backend_names, check_backend, execute, make_backend
from lazylab.runner.lock import RunLock
from lazylab.runner.many import RunSummary, run_many
from lazylab.runner.orchestrate import (
    ProgressSink,
    RunOutcome,
    check_resume,
    check_start,
    describe_changes,
    run_experiment,
)
from lazylab.runner.params import SEEDS_MAX, coerce, describe_validation_error, resolve_spec
from lazylab.runner.policy import ExecutionPolicy, check_precision, default_threads
from lazylab.runner.spec import RunSpec, WorkGroup, WorkUnit, plan_groups, plan_units

__all__ = [
    "SEEDS_MAX", "DataNotFound", "ExecutionPolicy", "InputError",
    "LazylabError", "ProgressSink", "RunLock", "RunOutcome", "RunSpec", "RunSummary",
    "StoreFault", "UnitFailed", "WorkGroup", "WorkUnit", "backend_names", "check_backend",
    "check_precision", "check_resume", "check_start",
    "coerce", "default_threads", "describe_changes", "describe_validation_error",
    "execute", "make_backend", "plan_groups", "plan_units", "resolve_spec", "run_experiment",
    "run_many",
]
