"""The summary ``bench/device_session.sh`` brings back: per experiment, the units stored of all
the paper-scale units, their compute seconds, the one-H100 model's seconds for that share of
the experiment and the ratio, and the claims where the experiment completed; then every
stored unit's seconds.

The model's share is ``paper_h100_seconds x stored / all units``
(``src/lazylab/experiments/paper_estimates.json``): units of one experiment differ in size,
so a partial ratio is indicative; a complete experiment's is exact.

Run: ``python bench/device_summary.py STORE_DIR ID [ID ...]``.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path


def stored(db: Path) -> list[tuple[str, str, int, float, str]]:
    """(experiment, unit key, seed index, seconds, finished at) of every stored unit."""
    if not db.is_file():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("select experiment, unit_key, seed_index, seconds, finished_at "
                           "from units order by finished_at").fetchall()
    except sqlite3.OperationalError:  # an empty store
        return []
    finally:
        con.close()


def claims_cell(folder: Path) -> str:
    """``held/tested`` (consistency checks left out) and the failed ids, or '-'."""
    path = folder / "claims.json"
    if not path.is_file():
        return "-"
    claims = [c for c in json.loads(path.read_text())
              if not (isinstance(c.get("details"), dict)
                      and c["details"].get("kind") == "consistency")]
    st = Counter(c.get("status") or ("held" if c.get("held") else "failed") for c in claims)
    failed = [c["id"] for c in claims if (c.get("status") or "") == "failed"]
    out = f"{st['held']}/{st['held'] + st['failed']}"
    return out + (f" (failed: {', '.join(failed)})" if failed else "")


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    from lazylab.experiments import get_experiment

    store = Path(sys.argv[1])
    units = stored(store / "lazylab.sqlite")
    est = json.loads((Path(__file__).resolve().parents[1]
                      / "src/lazylab/experiments/paper_estimates.json").read_text())
    print("| experiment | units stored | compute s | H100 model s (that share) | ratio | claims |")
    print("|---|---|---|---|---|---|")
    for exp_id in sys.argv[2:]:
        exp = get_experiment(exp_id)
        total = len(exp.units(exp.resolve("paper"))) * exp.default_seeds.get("paper", 1)
        mine = [u for u in units if u[0] == exp_id]
        secs = sum(u[3] for u in mine)
        model = est.get(exp_id, {}).get("paper_h100_seconds", float("nan")) * len(mine) / total
        ratio = f"{secs / model:.2f}" if mine and model > 0 else "-"
        print(f"| {exp_id} | {len(mine)}/{total} | {secs:.1f} | {model:.1f} | {ratio} "
              f"| {claims_cell(store / exp_id)} |")
    print("\n| experiment | unit | seed | seconds | finished |\n|---|---|---|---|---|")
    for u in units:
        print("| " + " | ".join(str(v) for v in u) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
