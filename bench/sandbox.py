"""The sandbox figure: execute_code's round trip locally, for ``print(1)`` and for a chart.

Each sample is one call of the execute_code tool as a run makes it: the program goes through
the local backend (bubblewrap namespaces where they can be had, with the scientific stack of
``make sandbox-stack``), the working directory is carried in and out, and the files the
program wrote to ``output/`` are kept in a file store in a temporary directory. The chart
program reads a 1,000-row CSV with pandas (in the working directory, as an attachment would
be) and saves a matplotlib bar chart of its monthly totals as a PNG.

*Cold* is the first call after the kernel's page cache was dropped (as root; otherwise the
first call of this process, and the row says so): the interpreter and the libraries are read
from disk. *Warm* is the median of the calls after it. Each program is a new process either
way: nothing is kept between calls but the files.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

PRINT = "print(1)"
CHART = """
import pandas as pd
import matplotlib.pyplot as plt
frame = pd.read_csv("sales.csv", parse_dates=["date"])
monthly = frame.groupby(frame["date"].dt.to_period("M"))["amount"].sum()
monthly.plot(kind="bar", title="Monthly totals")
plt.tight_layout()
plt.savefig("output/monthly.png", dpi=80)
print(len(frame), round(monthly.sum(), 2))
"""
WARM_CALLS = 15


def sales_csv(rows: int = 1000) -> bytes:
    lines = ["date,amount"]
    lines += [f"2026-{1 + i % 12:02d}-{1 + i % 28:02d},{(i * 37) % 1000 / 10}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def drop_page_cache() -> bool:
    """Empty the kernel's page cache (root only); whether it was done."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        return False
    return True


async def _call(tool: Any, code: str, workspace: Any, number: int) -> tuple[float, dict[str, Any]]:
    """One execute_code call as a run makes it; its wall time in ms and its result."""
    from agentloop.files.workspace import WORKSPACE_KEY
    from agentloop.limits import CancelToken, Deadline, TokenBudget
    from agentloop.tools.base import ToolContext

    ctx = ToolContext(
        call_id=f"call_{number}",
        depth=0,
        deadline=Deadline.after(120),
        budget=TokenBudget(100_000),
        cancel=CancelToken(),
        extras={WORKSPACE_KEY: workspace},
    )
    args = tool.args_model(code=code)
    started = time.perf_counter()
    output = await tool.fn(args, ctx)
    return (time.perf_counter() - started) * 1000, output.result


def _program_row(tool: Any, code: str, make_workspace: Callable[[], Any]) -> dict[str, Any]:
    async def measure() -> dict[str, Any]:
        workspace = make_workspace()
        await workspace.apply({"sales.csv": sales_csv()})
        dropped = drop_page_cache()
        cold, result = await _call(tool, code, workspace, 0)
        if result["exit_code"] != 0:
            return {"ok": False, "why": result["stderr"][-300:]}
        warm = [(await _call(tool, code, workspace, n))[0] for n in range(1, WARM_CALLS + 1)]
        return {
            "ok": True,
            "cold_ms": round(cold, 1),
            "cold_kind": "page cache dropped" if dropped else "first call of the process",
            "warm_ms": round(statistics.median(warm), 1),
            "warm_min_ms": round(min(warm), 1),
            "calls": WARM_CALLS,
            "files": [f["name"] for f in result.get("files", [])],
        }

    return asyncio.run(measure())


def measure(say: Callable[[str], None]) -> dict[str, Any]:
    """The figure's rows: ``print(1)`` and the chart, cold and warm."""
    from agentloop.files.artifacts import Artifacts
    from agentloop.files.blobs import DirectoryBlobs
    from agentloop.files.workspace import Workspace
    from agentloop.sandbox.settings import SandboxSettings
    from agentloop.tools.execute_code import execute_code_tool

    settings = SandboxSettings.from_env()
    rows: dict[str, Any] = {
        "backend": settings.describe(),
        "libraries": settings.offered_libraries(),
    }
    tool = execute_code_tool(settings)
    with tempfile.TemporaryDirectory() as tmp:
        artifacts = Artifacts(DirectoryBlobs(tmp))
        for name, code in (("print(1)", PRINT), ("pandas + matplotlib chart", CHART)):
            say(f"  sandbox: {name}")
            rows[name] = _program_row(tool, code, lambda: Workspace("bench", artifacts, "t"))
    return rows
