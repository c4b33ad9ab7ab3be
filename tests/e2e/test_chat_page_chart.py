"""The whole of "here is a CSV, plot the monthly totals", in Chromium: the page uploads the CSV,
the scripted model's program reads it with pandas and plots it with matplotlib in the real
sandbox (namespaces, the stack of ``make sandbox-stack``), and the chart is shown in the tool
card and under the answer. Screenshots at 1280x800 and 390x844 in ``test-output/screenshots``
(``chart-*.png``)."""

from __future__ import annotations

import io
import re

import httpx
import pytest
from PIL import Image
from playwright.sync_api import Page, expect

from agentloop.sandbox.settings import SandboxSettings
from agentloop.tools.execute_code import execute_code_tool
from tests.e2e.conftest import WAIT_MS, ServeChat, open_chat, send, wait_for_reply
from tests.e2e.screenshot import SHOTS, SIZES
from tests.e2e.test_chat_page_files import DECODED, attach, file_payload
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.sandbox_probes import LOCAL_STACK, NEEDS_ISOLATED_STACK

pytestmark = [pytest.mark.e2e, *NEEDS_ISOLATED_STACK]

expect.set_options(timeout=WAIT_MS)

SALES = "date,amount\n" + "".join(
    f"2026-{month:02d}-{day:02d},{month * 17 % 40 + day}\n"
    for month in range(1, 13)
    for day in (3, 17)
)
PLOT = """
import pandas as pd
import matplotlib.pyplot as plt
frame = pd.read_csv("sales.csv", parse_dates=["date"])
monthly = frame.groupby(frame["date"].dt.strftime("%b"), sort=False)["amount"].sum()
ax = monthly.plot(kind="bar", title="Monthly totals", color="#2f5fd0", figsize=(8, 4.5))
ax.set_xlabel("")
plt.tight_layout()
plt.savefig("output/monthly.png", dpi=100)
print(monthly.idxmax(), monthly.max())
"""


def test_a_csv_is_plotted_in_the_sandbox_and_the_chart_is_on_the_page(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    settings = SandboxSettings.from_env(
        {"AGENTLOOP_SANDBOX_ISOLATION": "namespaces", "AGENTLOOP_SANDBOX_STACK": str(LOCAL_STACK)}
    )
    server = serve_chat([execute_code_tool(settings)])
    llm.script(
        Reply(text="Plotting the monthly totals.", tool_calls=[call("execute_code", code=PLOT)]),
        Reply(text="The chart is above: **July** had the most sales."),
    )
    open_chat(page, server, tools=("execute_code",))
    attach(page, file_payload("sales.csv", SALES.encode(), "text/csv"))
    send(page, "Here is a CSV: plot the monthly totals")
    wait_for_reply(page)

    reply = page.locator("article.assistant").last
    card = reply.locator('.tool-card[data-name="execute_code"]')
    chart = card.locator(".file-figure img")
    expect(chart).to_have_attribute("alt", "monthly.png")
    assert chart.evaluate(DECODED) == 800  # 8 in at 100 dpi: matplotlib's PNG, decoded
    expect(reply.get_by_role("region", name="Files from this answer").locator("img")).to_have_count(
        1
    )
    told = llm.requests[1].messages[-1]["content"]
    assert '"stdout": "Jul 98\\n"' in told, told  # the program's own sums
    src = chart.get_attribute("src") or ""
    assert re.match(r"^http://127\.0\.0\.1:\d+/files/[\w-]+\?expires=\d+&signature=\w+$", src)
    png = Image.open(io.BytesIO(httpx.get(src, timeout=10).content))
    assert (png.format, png.size) == ("PNG", (800, 450))

    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in SIZES.values():
        page.set_viewport_size({"width": width, "height": height})
        card.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"chart-{width}x{height}.png"))
