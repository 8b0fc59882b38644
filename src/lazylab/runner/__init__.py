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
from lazylab.machine import machine_memory
from lazylab.runner.address import check_address
from lazylab.runner.assemble import (
    Assembly,
    collect_rows,
    draw_figure,
    finish_experiment,
    non_finite_summary,
    rebuild,
    theory_rows,
)
from lazylab.runner.backends import (
    backend_names,
    check_backend,
    execute,
    make_backend,
    make_job,
    register_backend,
)
from lazylab.runner.gpu_share import MIN_RESERVE, USABLE, ledger_dir, reserve
from lazylab.runner.job import Backend, Clock, Done, Job, Result, call_group, failure, group_done
from lazylab.runner.lock import RunLock, is_held, lock_path
from lazylab.runner.manifest import (
    MANIFEST_PATH,
    build_manifest,
    build_papers,
    builtin,
    check_assignments,
    check_value,
    load_manifest,
    load_papers,
    write_manifest,
)
from lazylab.runner.many import RunSummary, run_many
from lazylab.runner.orchestrate import (
    ProgressSink,
    RunOutcome,
    check_resume,
    check_start,
    clock_for,
    describe_changes,
    run_experiment,
)
from lazylab.runner.outputs import (
    OUTPUT_FILES,
    atomic_write,
    experiment_dirs,
    plain_log_ticks,
    read_results,
    save_figure,
    temp_path,
    write_json,
    write_results_csv,
)
from lazylab.runner.params import (
    SEEDS_MAX,
    check_keys,
    check_seeds,
    coerce,
    describe_validation_error,
    resolve_spec,
)
from lazylab.runner.policy import (
    CUBLAS_WORKSPACE,
    PRECISIONS,
    ExecutionPolicy,
    check_precision,
    default_threads,
    limit_blas,
)
from lazylab.runner.pool import PoolBackend
from lazylab.runner.preflight import check_can_start, check_output_paths, check_resume_policy
from lazylab.runner.provenance import (
    command_line,
    environment,
    git_revision,
    policy_flags,
    reproduce_command,
    resume_policy_advice,
)
from lazylab.runner.ray_backend import (
    CONNECT_SECONDS,
    MAX_RETRIES,
    PROBE_SECONDS,
    RayBackend,
    resources_for,
)
from lazylab.runner.rows import Rows, tidy_rows
from lazylab.runner.schemas import (
    CLAIMS,
    MAX_BYTES,
    MAX_DEPTH,
    ClaimRecord,
    ConfigFile,
    JsonFileError,
    PolicyRecord,
    RobustnessFile,
    read_checked,
)
from lazylab.runner.serial import SerialBackend
from lazylab.runner.spec import (
    IDENTITY_PACKAGES,
    RunSpec,
    WorkGroup,
    WorkUnit,
    package_versions,
    plan_groups,
    plan_units,
)

__all__ = [
    # errors (lazylab.errors, re-exported)
    "DataNotFound", "InputError", "LazylabError", "StoreFault", "UnitFailed",
    # what to run and its units (runner.spec)
    "IDENTITY_PACKAGES", "RunSpec", "WorkGroup", "WorkUnit", "package_versions", "plan_groups",
    "plan_units",
    # --set values, validation and the resolved spec (runner.params)
    "SEEDS_MAX", "check_keys", "check_seeds", "coerce", "describe_validation_error",
    "resolve_spec",
    # the execution policy (runner.policy)
    "CUBLAS_WORKSPACE", "PRECISIONS", "ExecutionPolicy", "check_precision", "default_threads",
    "limit_blas", "machine_memory",
    # the backend protocol (runner.job)
    "Backend", "Clock", "Done", "Job", "Result", "call_group", "failure", "group_done",
    # backends (runner.serial, runner.pool, runner.ray_backend, runner.backends)
    "SerialBackend", "PoolBackend", "CONNECT_SECONDS", "MAX_RETRIES", "PROBE_SECONDS",
    "RayBackend", "resources_for", "backend_names", "check_backend", "execute",
    "make_backend", "make_job", "register_backend",
    # GPU memory shared between workers (runner.gpu_share)
    "MIN_RESERVE", "USABLE", "ledger_dir", "reserve",
    # cluster addresses (runner.address)
    "check_address",
    # the output-folder lock (runner.lock)
    "RunLock", "is_held", "lock_path",
    # checks before any unit computes (runner.preflight)
    "check_can_start", "check_output_paths", "check_resume_policy",
    # one experiment end to end (runner.orchestrate)
    "ProgressSink", "RunOutcome", "check_resume", "check_start", "clock_for", "describe_changes",
    "run_experiment",
    # several experiments into one folder (runner.many)
    "RunSummary", "run_many",
    # results, claims and figure from stored units (runner.rows, runner.assemble)
    "Rows", "tidy_rows", "Assembly", "collect_rows", "draw_figure",
    "finish_experiment", "non_finite_summary", "rebuild", "theory_rows",
    # output files, written atomically (runner.outputs)
    "OUTPUT_FILES", "atomic_write", "experiment_dirs", "plain_log_ticks", "read_results",
    "save_figure", "temp_path", "write_json", "write_results_csv",
    # the JSON files a run writes and reads back (runner.schemas)
    "CLAIMS", "MAX_BYTES", "MAX_DEPTH", "ClaimRecord", "ConfigFile", "JsonFileError",
    "PolicyRecord", "RobustnessFile", "read_checked",
    # the parameter manifest (runner.manifest)
    "MANIFEST_PATH", "build_manifest", "build_papers", "builtin", "check_assignments",
    "check_value", "load_manifest", "load_papers", "write_manifest",
    # what a run records about its environment (runner.provenance)
    "command_line", "environment", "git_revision", "policy_flags", "reproduce_command",
    "resume_policy_advice",
]
