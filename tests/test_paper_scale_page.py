"""docs/paper-scale.md: its generated blocks equal what bench/paper_scale_page.py builds from the
registry and the committed results, every file the manifest names exists, and the claim counts
follow the claims' statuses."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import paper_scale_page as page  # noqa: E402


def test_the_page_is_current() -> None:
    text = page.PAGE.read_text()
    assert page.render(text) == text, "run bench/paper_scale_page.py --write"


def test_every_recorded_file_exists_and_names_its_experiment() -> None:
    runs = json.loads(page.MANIFEST.read_text())["runs"]
    assert len({r["id"] for r in runs}) == len(runs)
    for r in runs:
        assert r["wall_seconds"] > 0
        for key in ("claims", "figure", "results"):
            if r.get(key):
                assert (page.FOLDER / r[key]).is_file(), r[key]
        if r.get("results"):  # a recorded run keeps the config of the same experiment
            config = json.loads((page.FOLDER / r["results"]).with_name("config.json").read_text())
            assert config["experiment"] == r["id"]


def _claim(status: str, consistency: bool = False) -> dict:
    return {"id": status, "held": status == "held", "status": status,
            "details": {"kind": "consistency"} if consistency else {}}


def test_claim_counts_leave_out_consistency_checks() -> None:
    claims = [_claim("held"), _claim("held"), _claim("failed"), _claim("not_applicable"),
              _claim("failed", consistency=True)]
    assert page.claim_counts(claims) == "2/3 held, 1 failed, 1 n/a"
    # an old claims.json without "status" is read from "held"
    assert page.claim_counts([{"held": True}, {"held": False}]) == "1/2 held, 1 failed"


@pytest.mark.parametrize(("seconds", "needs"), [(None, "GPU"), (3600.0, "CPU"),
                                                (3601.0, "CPU, resumed"),
                                                (30 * 3600.0, "CPU, resumed"),
                                                (30 * 3600.0 + 1, "GPU")])
def test_hardware_follows_the_one_core_projection(seconds: float | None, needs: str) -> None:
    assert page.hardware(seconds) == needs


def test_a_stale_block_is_seen() -> None:
    text = page.PAGE.read_text()
    begin, _ = page._markers("table")
    tilted = text.replace(begin + "\n", begin + "\n| stale |\n", 1)
    assert page.render(tilted) == text
    assert tilted != text
