"""rocs on the robustness matrix and the ROCS examples, beside linux and its control run.

One run per config and policy at full length, default seed. Prints, per config, the summed IPC
of rocs over linux's, the worst process's ratio, the control's (``rocs+control``: the same color
decisions, no page moved) over linux's, the searches (and how many were skipped), the pages moved
to the buffer and back, and the ticks steps waited for the search's budget (docs/rocs.md, "Doing
no harm"). About ten minutes on one core.

    .venv/bin/python benches/rocs_no_harm.py
"""
from __future__ import annotations

import glob
import json
from pathlib import Path

from cachecolor import _core
from cachecolor.system import apply_policy_seed, load_system_config

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted(glob.glob(str(ROOT / "examples/robustness/*.toml"))) + [
    str(ROOT / f"examples/rocs/{n}.toml") for n in ("art", "swim", "mcf", "phases")
]


def run(path: str, policy: str) -> dict:
    cfg = load_system_config(path)
    apply_policy_seed(cfg, policy, None)
    return json.loads(_core.simulate_system(json.dumps(cfg), "json"))


def main() -> None:
    for f in CONFIGS:
        lin, roc, ctl = (run(f, p) for p in ("linux", "rocs", "rocs+control"))
        ipc = lambda d: sum(p["ipc"] for p in d["processes"])  # noqa: E731
        each = [r["ipc"] / l["ipc"] for r, l in zip(roc["processes"], lin["processes"])]
        pr = roc["policy_report"]
        searches = [s for u in pr["units"] for s in u["searches"]]
        skipped = sum(1 for s in searches if s.get("skipped"))
        waited = sum(x["waited_ticks"] for s in searches for x in s["steps"])
        print(
            f"{Path(f).name:32s} rocs/linux {ipc(roc) / ipc(lin):.4f} worst {min(each):.4f} "
            f"control/linux {ipc(ctl) / ipc(lin):.4f} searches {len(searches)} skipped {skipped} "
            f"to_buffer {pr['pages_to_buffer']} restored {pr['pages_restored']} waited {waited}",
            flush=True,
        )


if __name__ == "__main__":
    main()
