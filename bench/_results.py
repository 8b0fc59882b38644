"""Shared by the benchmarks: merge one benchmark's numbers into a JSON file.

``make bench`` runs every script; each calls :func:`record` with its ratios and times, which
are merged (by benchmark name) into ``runs/bench.json`` (or the path in ``$LAZYLAB_BENCH_JSON``)
alongside the machine they were measured on. The scripts also print everything they record.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch

DEFAULT_PATH = Path("runs") / "bench.json"


def machine(device: torch.device) -> dict[str, Any]:
    """Where the numbers were measured: CPU model, threads, torch version, GPU name."""
    info: dict[str, Any] = {"platform": platform.platform(), "processor": platform.processor(),
                            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                            "torch": torch.__version__, "device": str(device)}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def record(name: str, values: dict[str, Any], device: torch.device,
           path: str | os.PathLike[str] | None = None) -> Path:
    """Merge ``{name: values + machine + timestamp}`` into the JSON file; returns its path."""
    out = Path(path or os.environ.get("LAZYLAB_BENCH_JSON") or DEFAULT_PATH)
    out.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    if out.exists():
        try:
            data = json.loads(out.read_text())
        except json.JSONDecodeError:
            data = {}
    data[name] = {**values, "machine": machine(device),
                  "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"recorded in {out}")
    return out
