"""Provenance of a run: the package versions and git revision recorded in config.json, and the
command that reproduces an experiment from that config."""

from __future__ import annotations

import platform
import shlex
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["environment", "git_revision", "policy_flags", "reproduce_command"]


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
    """The command that reproduces one experiment: its scale, seeds, device and every
    parameter that differs from the scale's defaults (``--set``)."""
    from lazylab.experiments import get_experiment

    scale = str(config.get("scale", "quick"))
    params = config.get("params") or {}
    sets: list[str] = []
    try:
        defaults = get_experiment(exp_id).resolve(scale).model_dump(mode="json")
    except (KeyError, ValueError):
        defaults = {}
    for k, v in params.items():
        if k in defaults and defaults[k] == v:
            continue
        if isinstance(v, list):
            text = ",".join(str(x) for x in v)
        else:
            text = "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        sets += ["--set", f"{k}={text}"]
    dev = str(config.get("device", "auto")).split(":")[0]
    return shlex.join(["lazylab", "reproduce", exp_id, "--scale", scale, "--seeds",
                       str(config.get("seeds", 1)), "--device", dev, *sets,
                       *policy_flags(config.get("policy") or {})])


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
