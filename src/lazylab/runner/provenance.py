"""Provenance of a run: the package versions and git revision recorded in config.json, and the
command that reproduces an experiment from that config."""

from __future__ import annotations

import platform
import shlex
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any


def environment() -> dict[str, Any]:
    """Package versions and the git revision of the lazylab source tree."""
    versions = {"python": platform.python_version()}
    for pkg in ("torch", "numpy", "scipy", "lazylab"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    return {"versions": versions, "git_revision": git_revision()}


def git_revision() -> str:
    """``git rev-parse HEAD`` of the repository holding lazylab's source, else "unknown".

    The package directory must be tracked by that repository, so an installed copy that merely
    sits inside some other repository (a virtualenv in a project) is not misattributed. A
    ``+dirty`` suffix marks uncommitted changes to the package.
    """
    # The lazylab package, not this subpackage: "+dirty" covers every module of it.
    pkg = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            # --no-optional-locks: never take the index lock (read-only, safe beside other git).
            r = subprocess.run(["git", "--no-optional-locks", "-C", str(pkg), *args],
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    if git("ls-files", "--error-unmatch", "__init__.py") is None:
        return "unknown"
    rev = git("rev-parse", "HEAD")
    if not rev:
        return "unknown"
    dirty = git("status", "--porcelain", "--", ".")
    return rev + ("+dirty" if dirty else "")


def reproduce_command(exp_id: str, config: dict[str, Any]) -> str:
    """The command that reproduces one experiment from its stored ``config.json``: its scale,
    seeds, device and every parameter that differs from the scale's defaults (``--set``)."""
    from lazylab.experiments import get_experiment

    scale = str(config.get("scale", "quick"))
    params = config.get("params") or {}
    try:
        defaults = get_experiment(exp_id).resolve(scale).model_dump(mode="json")
    except (KeyError, ValueError):
        defaults = {}
    sets = [f"{k}={_set_text(v)}" for k, v in params.items()
            if not (k in defaults and defaults[k] == v)]
    return command_line([exp_id], scale=scale, seeds=int(config.get("seeds", 1)),
                        device=str(config.get("device", "auto")).split(":")[0], sets=sets,
                        policy=config.get("policy") or {})


def command_line(targets: Sequence[str], *, scale: str, seeds: int | None = None,
                 device: str = "auto", sets: Sequence[str] = (),
                 policy: dict[str, Any] | None = None, options: Sequence[str] = ()) -> str:
    """The one ``lazylab reproduce`` command line builder: targets, scale, seeds (omitted when
    None), device, ``--set KEY=VALUE`` items, further ``options`` as given, then the
    execution policy's flags (:func:`policy_flags`).

    >>> command_line(["toy"], scale="quick", seeds=2, device="cpu", sets=["d=3"],
    ...              policy={"threads": 1}, options=["--out", "my runs"]).split(" --", 5)[5]
    "out 'my runs' --threads 1"
    """
    parts = ["lazylab", "reproduce", *targets, "--scale", scale]
    if seeds is not None:
        parts += ["--seeds", str(seeds)]
    parts += ["--device", device]
    for s in sets:
        parts += ["--set", s]
    return shlex.join([*parts, *options, *policy_flags(policy or {})])


def _set_text(v: Any) -> str:
    """A parameter value as ``--set`` reads it back (lists comma-separated)."""
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def policy_flags(policy: dict[str, Any]) -> list[str]:
    """The options that recreate an execution policy (``ExecutionPolicy.identity()``), which is
    part of the identity ``--resume`` checks: ``--threads``, ``--precision tf32``,
    ``--memory-budget`` (GiB).

    >>> policy_flags({"threads": 2, "allow_tf32": True, "memory_budget": 2**30})
    ['--threads', '2', '--precision', 'tf32', '--memory-budget', '1']
    """
    out: list[str] = []
    if policy.get("threads"):
        out += ["--threads", str(int(policy["threads"]))]
    if policy.get("allow_tf32"):
        out += ["--precision", "tf32"]
    if policy.get("memory_budget"):
        out += ["--memory-budget", f"{policy['memory_budget'] / 2**30:g}"]
    return out


def _budget_text(budget: Any) -> str:
    return f"--memory-budget {budget / 2**30:g}" if budget else "no --memory-budget"


def resume_policy_advice(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What to change so that a resume computes under the stored execution policy ``old``
    (``ExecutionPolicy.identity()``) instead of ``new``: each option that differs, with the
    stored value and this run's, then the options to pass and to leave out.

    Only the options that differ are named (advice to pass the stored run's full flags, while
    this run added ``--memory-budget``, was followed and refused again). A difference no option
    recreates (a store written before BLAS threads were capped) says so.

    >>> a = resume_policy_advice({"threads": 2, "memory_budget": None},
    ...                          {"threads": 1, "memory_budget": 2**30})
    >>> a.split("; ")[0]
    'stored --threads 2, this run --threads 1'
    >>> a.split(": ")[-1]
    'to resume, pass --threads 2 and leave out --memory-budget'
    """
    seen: list[str] = []
    add: list[str] = []
    drop: list[str] = []
    if old.get("threads") != new.get("threads"):
        seen.append(f"stored --threads {old.get('threads')}, this run --threads "
                    f"{new.get('threads')}")
        add.append(f"--threads {old.get('threads')}")
    if bool(old.get("allow_tf32")) != bool(new.get("allow_tf32")):
        was = "tf32" if old.get("allow_tf32") else "fp32"
        seen.append(f"stored --precision {was}, this run "
                    f"--precision {'tf32' if new.get('allow_tf32') else 'fp32'}")
        add.append(f"--precision {was}")
    if old.get("memory_budget") != new.get("memory_budget"):
        seen.append(f"stored {_budget_text(old.get('memory_budget'))}, this run "
                    f"{_budget_text(new.get('memory_budget'))}")
        (add.append(_budget_text(old["memory_budget"])) if old.get("memory_budget")
         else drop.append("--memory-budget"))
    named = {"threads", "allow_tf32", "memory_budget"}
    if "blas_threads" in old and "blas_threads" in new:
        named.add("blas_threads")  # follows --threads; only its absence (an old store) matters
    rest = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k not in named)
    if rest:
        seen.append(f"{', '.join(rest)} {', '.join(str(old.get(k)) for k in rest)} -> "
                    f"{', '.join(str(new.get(k)) for k in rest)}")
        return "; ".join(seen) + ": no option recreates the stored policy"
    todo = " and ".join(filter(None, [f"pass {' '.join(add)}" if add else "",
                                      f"leave out {' '.join(drop)}" if drop else ""]))
    return "; ".join(seen) + f": to resume, {todo}"
