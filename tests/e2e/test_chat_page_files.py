"""Files on the chat page, in Chromium against the app, the scripted model and ``make_file``
(a tool that keeps a file through the run's workspace, as execute_code will).

* Attach: files chosen in the composer are chips until sent, go with the message as
  ``attachments``, and the sent message names them; the page says which files it left out
  (more than 10, over 4 MiB) and a file the server refuses comes back to the composer.
* ``file`` events: a picture in the card of the call that made it and under the answer
  (decoded: ``naturalWidth > 0``), any other file a download link; a reload shows the same.
* Hostile files: a name with markup is text, an SVG with script runs none in an ``<img>``,
  an HTML file is a download.
* Pictures at 1280x800 and 390x844 in ``test-output/screenshots/files-*.png``, with a large
  chart kept within its card at its own shape.
"""

from __future__ import annotations

import base64
import re
import threading
import time

import httpx
import pytest
from playwright.sync_api import Dialog, FilePayload, Locator, Page, Route, expect

from tests.e2e.conftest import WAIT_MS, ServeChat, chat_bodies, open_chat, send, wait_for_reply
from tests.e2e.screenshot import SHOTS, SIZES
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.sample_tools import gate_tool, make_file_tool, tiny_png

pytestmark = pytest.mark.e2e

expect.set_options(timeout=WAIT_MS)

REPLY = "article.assistant"
CARD = '.tool-card[data-name="make_file"]'
CSV = b"city,people\nLyon,522250\nMarseille,873076\n"
HOSTILE_NAME = "<img src=x onerror=alert(1)>.svg"
KEPT_HOSTILE_NAME = "_img src_x onerror_alert(1)_.svg"  # the server's safe name for it
SVG_WITH_SCRIPT = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="60" onload="alert(1)">'
    "<script>alert(2); parent.__ran = true;</script>"
    '<rect width="120" height="60" fill="#2f5fd0"/></svg>'
)
HTML_WITH_SCRIPT = "<html><body><script>alert(3); opener.__ran = true;</script>hi</body></html>"

# A picture's decoding: its natural width once decoded (0 if it is not an image at all).
DECODED = "(img) => img.decode().then(() => img.naturalWidth, () => 0)"


def file_payload(name: str, data: bytes, mime: str = "text/plain") -> FilePayload:
    return {"name": name, "mimeType": mime, "buffer": data}


def attach(page: Page, *files: FilePayload) -> None:
    """Choose files the way a person does: Attach, then the browser's file chooser."""
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name=re.compile("^Attach files")).click()
    chooser.value.set_files(list(files))


def record_dialogs(page: Page) -> list[str]:
    dialogs: list[str] = []

    def record(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    return dialogs


def natural_width(image: Locator) -> int:
    width: int = image.evaluate(DECODED)
    return width


def check_files_shown(page: Page, reply: Locator) -> None:
    """The chart in the first card and under the answer, decoded; summary.txt a link in the
    second card and under the answer, whose target is the file."""
    cards = reply.locator(CARD)
    expect(cards).to_have_count(2)
    chart = cards.nth(0).locator(".file-figure img")
    expect(chart).to_have_attribute("alt", "chart.png")
    assert natural_width(chart) == 4  # tiny_png(): 4x3
    caption = cards.nth(0).locator(".file-figure figcaption")
    expect(caption).to_have_text(f"chart.png{len(tiny_png())} B")
    expect(cards.nth(0).locator(".file-link")).to_have_count(0)
    link = cards.nth(1).locator(".file-link a")
    expect(link).to_have_text("summary.txt")
    expect(cards.nth(1).locator(".file-link .file-size")).to_have_text("9 B")
    expect(cards.nth(1).locator("img")).to_have_count(0)

    files = reply.get_by_role("region", name="Files from this answer")
    thumb = files.locator(".thumb img")
    expect(thumb).to_have_count(1)
    assert natural_width(thumb) == 4
    expect(files.locator(".file-link a")).to_have_text(["summary.txt"])
    href = link.get_attribute("href") or ""
    # The server's relative link, under the API the page talks to.
    assert re.match(r"^http://127\.0\.0\.1:\d+/files/[\w-]+\?expires=\d+&signature=\w+$", href)
    assert httpx.get(href, timeout=10).text == "total 42\n"
    # Under the answer's text, above its line of figures.
    order = reply.evaluate("(r) => [...r.children].map((n) => n.className)")
    assert order[:2] == ["transcript", "files"]


def test_an_uploaded_csv_goes_with_the_message_and_the_files_show_in_card_and_answer(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([make_file_tool()])
    bodies = chat_bodies(page)
    llm.script(
        Reply(
            text="Charting it.",
            tool_calls=[
                call("make_file", name="chart.png"),
                call("make_file", name="summary.txt", text="total 42\n"),
            ],
        ),
        Reply(text="Here is the chart of **data.csv**."),
    )
    open_chat(page, server, extra_tools="make_file")
    attach(page, file_payload("data.csv", CSV, "text/csv"))
    chips = page.get_by_role("list", name="Files to send").get_by_role("listitem")
    expect(chips).to_have_count(1)
    expect(chips.locator(".chip-name")).to_have_text("data.csv")
    expect(chips.locator(".chip-size")).to_have_text("41 B")
    send(page, "Plot data.csv")
    wait_for_reply(page)

    assert bodies[0]["attachments"] == [
        {"name": "data.csv", "data": base64.b64encode(CSV).decode()}
    ]
    asked = llm.requests[0].messages[-1]["content"]
    assert asked.startswith("Plot data.csv\n\n[Attached files")
    assert "data.csv (text/csv, 41 B)" in asked
    expect(page.get_by_role("list", name="Files to send")).to_be_hidden()
    question = page.locator(".msg.user").last
    expect(question.locator(".md")).to_have_text("Plot data.csv")
    expect(question.get_by_role("list", name="Attached files")).to_have_text("data.csv")
    check_files_shown(page, page.locator(REPLY).last)

    page.reload()
    saved = page.locator(f'{REPLY}[data-state="saved"]')
    expect(saved).to_have_count(1)
    # The server's note on the question is shown as the names it lists.
    question = page.locator(".msg.user")
    expect(question.locator(".md")).to_have_text("Plot data.csv")
    expect(question.get_by_role("list", name="Attached files")).to_have_text("data.csv")
    check_files_shown(page, saved)


def test_a_reload_mid_answer_shows_the_files_made_so_far_once(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    gate = threading.Event()
    server = serve_chat([make_file_tool(), gate_tool(gate)])
    llm.script(
        Reply(tool_calls=[call("make_file", name="chart.png")]),
        Reply(tool_calls=[call("gate", name="g1")]),
        Reply(text="All done."),
    )
    open_chat(page, server, extra_tools="make_file, gate")
    attach(page, file_payload("data.csv", CSV, "text/csv"))
    try:
        send(page, "Chart it, then wait")
        gate_card = page.locator('.tool-card[data-name="gate"]')
        expect(gate_card).to_have_attribute("data-status", "running")
        page.reload()  # the chart's round is kept in the thread; the run waits on the gate
        expect(gate_card).to_have_attribute("data-status", "running")
        question = page.locator(".msg.user")
        expect(question.locator(".md")).to_have_text(["Chart it, then wait"])
        expect(question.get_by_role("list", name="Attached files")).to_have_text("data.csv")
    finally:
        gate.set()
    wait_for_reply(page)
    reply = page.locator(REPLY)
    expect(reply).to_have_count(1)
    expect(reply.locator(".answer").last).to_have_text("All done.")
    assert natural_width(reply.locator(CARD).locator(".file-figure img")) == 4
    expect(reply.locator(".files .thumb")).to_have_count(1)


def test_a_name_with_markup_is_text_and_svg_or_html_runs_no_script(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([make_file_tool()])
    dialogs = record_dialogs(page)
    llm.script(
        Reply(
            tool_calls=[
                call("make_file", name=HOSTILE_NAME, text=SVG_WITH_SCRIPT),
                call("make_file", name="page.html", text=HTML_WITH_SCRIPT),
            ]
        ),
        Reply(text="Copied them."),
    )
    open_chat(page, server, extra_tools="make_file")
    attach(
        page,
        file_payload(HOSTILE_NAME, SVG_WITH_SCRIPT.encode(), "image/svg+xml"),
        file_payload("page.html", HTML_WITH_SCRIPT.encode(), "text/html"),
    )
    chips = page.get_by_role("list", name="Files to send").locator(".chip-name")
    expect(chips).to_have_text([HOSTILE_NAME, "page.html"])
    send(page, "Copy both files")
    wait_for_reply(page)
    names = page.get_by_role("list", name="Attached files").get_by_role("listitem")
    expect(names).to_have_text([HOSTILE_NAME, "page.html"])

    reply = page.locator(REPLY).last

    def check() -> None:
        svg = reply.locator(CARD).nth(0).locator(".file-figure")
        expect(svg.locator("img")).to_have_attribute("alt", KEPT_HOSTILE_NAME)
        assert natural_width(svg.locator("img")) == 120  # shown, as a picture only
        expect(svg.locator(".file-name")).to_have_text(KEPT_HOSTILE_NAME)
        expect(reply.locator(CARD).nth(1).locator(".file-link a")).to_have_text("page.html")
        # Nothing in the page came from a name: the only pictures are the two of the SVG.
        assert page.locator('img[src="x"]').count() == 0
        assert page.locator("#conversation img").count() == 2

    check()
    with page.expect_download() as download:
        reply.locator(CARD).nth(1).locator(".file-link a").click()
    assert download.value.suggested_filename == "page.html"
    page.reload()
    expect(page.locator(f'{REPLY}[data-state="saved"]')).to_have_count(1)
    # Reloaded, the question names the files as the server kept them.
    expect(names).to_have_text([KEPT_HOSTILE_NAME, "page.html"])
    reply = page.locator(REPLY).last
    check()
    assert page.evaluate("() => window.__ran") is None
    assert dialogs == []


def test_the_composer_leaves_out_what_is_over_the_bounds_and_says_so(
    page: Page, serve_chat: ServeChat
) -> None:
    server = serve_chat([])
    bodies = chat_bodies(page)
    open_chat(page, server)
    problem = page.locator("#attach-problem")
    chips = page.get_by_role("list", name="Files to send").get_by_role("listitem")

    attach(page, *(file_payload(f"part-{n}.txt", b"x" * n) for n in range(1, 12)))
    expect(chips).to_have_count(10)
    expect(problem).to_have_text("Not attached: “part-11.txt”; a message takes at most 10 files.")
    expect(problem).to_have_attribute("role", "alert")
    page.get_by_role("button", name="Remove part-3.txt").click()
    expect(chips).to_have_count(9)
    expect(problem).to_be_hidden()
    expect(chips.locator(".chip-name")).not_to_contain_text(["part-3.txt"])

    big = file_payload("big.bin", b"\0" * (4 * 1024 * 1024 + 1), "application/octet-stream")
    attach(page, big, file_payload("part-3.txt", b"xxx"))
    expect(problem).to_have_text(
        "Not attached: “big.bin”; a file may be at most 4 MiB, and it is larger."
    )
    expect(chips).to_have_count(10)
    assert bodies == []  # nothing went anywhere while choosing


def test_files_the_server_refuses_come_back_to_the_composer(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    """A conversation's working directory holds 4 MiB: a second 3 MiB file is a 413, and the
    message goes back to the box with its file among the composer's."""
    server = serve_chat([])
    llm.script(Reply(text="Got it."))
    open_chat(page, server)
    three = 3 * 1024 * 1024
    attach(page, file_payload("first.bin", b"a" * three, "application/octet-stream"))
    send(page, "Keep this")
    wait_for_reply(page)

    attach(page, file_payload("second.bin", b"b" * three, "application/octet-stream"))
    send(page, "And this")
    refused = page.locator(f'{REPLY}[data-state="error"]')
    expect(refused).to_contain_text("Too large (HTTP 413)")
    expect(refused).to_contain_text("Attach fewer or smaller files")
    expect(page.get_by_role("textbox", name="Message")).to_have_value("And this")
    chips = page.get_by_role("list", name="Files to send").locator(".chip-name")
    expect(chips).to_have_text(["second.bin"])
    assert len(llm.requests) == 1


def test_an_expired_link_or_a_refused_picture_says_so(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([make_file_tool()])
    llm.script(
        Reply(
            tool_calls=[
                call("make_file", name="chart.png"),
                call("make_file", name="notes.txt", text="n"),
            ]
        ),
        Reply(text="Made them."),
    )
    open_chat(page, server, extra_tools="make_file")
    send(page, "Make a chart and notes")
    wait_for_reply(page)
    card = page.locator(CARD).nth(1)
    expect(card.locator(".file-link a")).to_have_text("notes.txt")

    # An hour and a minute on, the link has expired: it says so instead of failing.
    page.clock.set_system_time(time.time() + 3660)
    card.locator(".file-link a").click()
    expect(card.locator(".file-expired")).to_have_text(re.compile("^This link has expired"))

    # The server refuses a link (here: its signature spoilt on the way): no broken picture.
    def spoil(route: Route) -> None:
        answer = route.fetch()
        body = re.sub(r"signature=\w+", "signature=" + "0" * 64, answer.text())
        route.fulfill(response=answer, body=body)

    page.route(re.compile(r"/threads/th_[\w-]+$"), spoil)
    page.clock.set_system_time(time.time())
    page.reload()
    saved = page.locator(f'{REPLY}[data-state="saved"]')
    expect(saved.locator(CARD).nth(0).locator(".file-missing")).to_have_text(
        "Not available now: reopen the conversation for a fresh link."
    )
    expect(saved.locator(".thumb .file-missing")).to_have_count(1)
    expect(saved.locator("img")).to_have_count(0)
    expect(saved.locator(CARD).nth(0).locator(".file-name")).to_have_text("chart.png")


def bar_chart_svg(width: int, height: int) -> str:
    """A bar chart as large as a plotting library's figure (its own size: width x height)."""
    bars = "".join(
        f'<rect x="{80 + i * 140}" y="{height - 60 - h}" width="90" height="{h}" fill="#2f5fd0"/>'
        for i, h in enumerate((220, 480, 330, 610, 410, 540, 290, 700, 380, 500))
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><rect width="{width}" height="{height}" fill="#fff"/>'
        f'<line x1="60" y1="{height - 60}" x2="{width - 40}" y2="{height - 60}" stroke="#333" '
        f'stroke-width="3"/>{bars}<text x="80" y="70" font-size="48" font-family="sans-serif">'
        "Monthly rainfall (mm)</text></svg>"
    )


def test_pictures_of_files_at_a_laptop_and_a_phone_size(
    page: Page, serve_chat: ServeChat, llm: ScriptedLLM
) -> None:
    server = serve_chat([make_file_tool()])
    open_chat(page, server, extra_tools="make_file")
    SHOTS.mkdir(parents=True, exist_ok=True)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.get_by_role("button", name="New chat").click()
        attach(
            page,
            file_payload("rainfall-2025-monthly-by-station.csv", CSV, "text/csv"),
            file_payload("stations.json", b'{"stations": 12}', "application/json"),
        )
        page.get_by_role("textbox", name="Message").fill("Chart the monthly rainfall")
        page.screenshot(path=str(SHOTS / f"files-composer-{size}.png"))
        llm.script(
            Reply(
                text="I'll chart it.",
                tool_calls=[
                    call("make_file", name="rainfall.svg", text=bar_chart_svg(1600, 900)),
                    call("make_file", name="rainfall-summary.csv", text="month,mm\nJan,61\n"),
                ],
            ),
            Reply(tool_calls=[call("make_file", name="tiny.png")]),
            Reply(text="The wettest month was **August**; the chart and the table are above."),
        )
        page.get_by_role("textbox", name="Message").press("Enter")
        wait_for_reply(page)
        reply = page.locator(REPLY).last
        chart = reply.locator(CARD).first.locator(".file-image")
        assert natural_width(chart) == 1600
        box = chart.bounding_box()
        card = reply.locator(CARD).first.bounding_box()
        assert box is not None
        assert card is not None
        # Within its card, smaller than its own size, its shape kept.
        assert box["x"] >= card["x"]
        assert box["x"] + box["width"] <= card["x"] + card["width"]
        assert box["width"] < 1600
        assert abs(box["width"] / box["height"] - 16 / 9) < 0.02
        scrolls = page.evaluate("() => document.documentElement.scrollWidth > innerWidth")
        assert not scrolls, f"{size}: the page scrolls sideways"
        reply.locator(CARD).first.evaluate("(card) => card.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(SHOTS / f"files-card-{size}.png"))
        reply.get_by_role("region", name="Files from this answer").evaluate(
            "(files) => files.scrollIntoView({block: 'end'})"
        )
        page.screenshot(path=str(SHOTS / f"files-answer-{size}.png"))


def test_a_file_url_that_is_not_http_never_becomes_a_link(
    page: Page, serve_chat: ServeChat
) -> None:
    server = serve_chat([])
    page.goto(server.url + "/")
    hostile = ["javascript:alert(1)", "data:text/html,<script>alert(1)</script>", "", None]
    shown = page.evaluate(
        """async ([urls, chatUrl]) => {
            const { CardFiles, Gallery, fileHref, readFileRef } = await import('/static/files.js');
            const card = document.createElement('div');
            const files = new CardFiles(card);
            const gallery = new Gallery();
            const hrefs = [];
            for (const [i, url] of urls.entries()) {
                hrefs.push(fileHref(url, chatUrl));
                for (const mediaType of ['image/png', 'text/csv']) {
                    const file = readFileRef(
                        { id: `f${i}${mediaType}`, name: 'x', media_type: mediaType, url }, chatUrl
                    );
                    files.add(file);
                    gallery.add(file);
                }
            }
            const nodes = [card, gallery.el].flatMap((root) => [...root.querySelectorAll('*')]);
            return {
                hrefs,
                linked: nodes.filter((n) => n.hasAttribute('href') || n.hasAttribute('src')).length,
                names: card.querySelectorAll('.file-name').length,
                relative: fileHref('/files/abc?expires=1', chatUrl),
                elsewhere: fileHref('//files.example/abc', chatUrl),
            };
        }""",
        [hostile, server.url + "/chat"],
    )
    assert shown["hrefs"] == [None, None, None, None]
    assert shown["linked"] == 0  # neither a link nor a picture: the name alone, as text
    assert shown["names"] == 2 * len(hostile)
    assert shown["relative"] == server.url + "/files/abc?expires=1"
    assert shown["elsewhere"] == "http://files.example/abc"
