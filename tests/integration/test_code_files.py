"""execute_code with files, end to end: ``POST /chat`` with the scripted model, the real local
sandbox (bubblewrap namespaces) and the scientific stack (``make sandbox-stack``).

A CSV attached to the request is read by the model's program with pandas and plotted with
matplotlib; the PNG comes back as a ``file`` event whose link serves an image Pillow decodes.
The working directory persists across a run's calls and a thread's runs and never reaches
another run; a program that makes 10,000 files or a 1 GB file is stopped with a note and the
run goes on; an attachment named like a path stays inside.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from agentloop.sandbox.settings import SandboxSettings
from agentloop.tools.execute_code import execute_code_tool
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.integration.thread_faces import ThreadedApp
from tests.sandbox_probes import LOCAL_STACK, NEEDS_ISOLATED_STACK

JSON = dict[str, Any]

pytestmark = NEEDS_ISOLATED_STACK

SALES = "date,amount\n" + "".join(
    f"2026-{month:02d}-{day:02d},{month * 10 + day}\n" for month in (1, 2, 3) for day in (1, 15)
)
PLOT = """
import pandas as pd
import matplotlib.pyplot as plt
frame = pd.read_csv("sales.csv", parse_dates=["date"])
monthly = frame.groupby(frame["date"].dt.to_period("M"))["amount"].sum()
print(monthly.to_dict())
monthly.plot(kind="bar", title="Monthly totals")
plt.tight_layout()
plt.savefig("output/monthly.png", dpi=60)
"""


@pytest.fixture
def served(tmp_path: Path, llm: ScriptedLLM) -> Iterator[ThreadedApp]:
    settings = SandboxSettings.from_env(
        {"AGENTLOOP_SANDBOX_ISOLATION": "namespaces", "AGENTLOOP_SANDBOX_STACK": str(LOCAL_STACK)}
    )
    with ThreadedApp(tmp_path, "code-files", [execute_code_tool(settings)]) as app:
        yield app


def chat(app: ThreadedApp, body: JSON) -> list[JSON]:
    """The events of a /chat run that may use execute_code."""
    return app.chat_events({"tools": ["execute_code"], **body}, timeout=60)


def results(events: list[JSON]) -> list[JSON]:
    """Each execute_code call's result as the model read it."""
    found = []
    for event in events:
        if event["type"] == "tool_call_result":
            payload = json.loads(event["content"])
            assert payload["ok"], payload
            found.append(payload["result"])
    return found


def code_calls(*programs: str) -> list[Reply]:
    return [Reply(tool_calls=[call("execute_code", code=p)]) for p in programs]


def test_a_csv_attached_is_plotted_and_the_png_is_shown(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    llm.script(*code_calls(PLOT))
    llm.script(Reply(text="Here are the monthly totals."))
    csv = {"name": "sales.csv", "data": base64.b64encode(SALES.encode()).decode()}
    message = {"role": "user", "content": "Plot the monthly totals."}
    events = chat(served, {"messages": [message], "attachments": [csv], "thread_id": "new"})

    [result] = results(events)
    assert result["exit_code"] == 0, result["stderr"]
    assert "Period('2026-01', 'M'): 36" in result["stdout"]
    [listed] = result["files"]
    assert (listed["name"], listed["media_type"]) == ("output/monthly.png", "image/png")
    [made] = [e for e in events if e["type"] == "file"]
    assert made["file"]["name"] == "monthly.png"
    assert made["file"]["media_type"] == "image/png"
    png = httpx.get(served.url + made["file"]["url"], timeout=10)
    assert png.status_code == 200
    image = Image.open(io.BytesIO(png.content))
    image.verify()  # a whole, valid PNG
    assert image.format == "PNG"
    assert image.size[0] > 100
    assert image.size[1] > 100
    # The model was told the attachment and what was made, never the bytes or the link.
    asked = llm.requests[0].messages[-1]["content"]
    assert "sales.csv (text/csv" in asked
    told = llm.requests[1].messages[-1]["content"]
    assert "monthly.png" in told
    assert made["file"]["url"] not in told
    assert "iVBOR" not in told  # no base64 PNG

    # The thread keeps the file; deleting the thread deletes it.
    thread_id = events[0]["thread_id"]
    kept = served.call("GET", f"/threads/{thread_id}").json()["files"]
    assert [f["id"] for f in kept] == [made["file"]["id"]]
    assert served.call("DELETE", f"/threads/{thread_id}").status_code == 200
    assert served.call("GET", f"/files/{made['file']['id']}").status_code == 404
    assert httpx.get(served.url + made["file"]["url"], timeout=10).status_code == 404


def test_files_persist_across_calls_and_runs_of_a_thread_and_nowhere_else(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    write = "open('notes.txt', 'w').write('kept between calls')\nprint('written')"
    read = "import os\nprint(sorted(os.listdir('.')), open('notes.txt').read())"
    llm.script(*code_calls(write, read), Reply(text="done"))
    message = {"role": "user", "content": "remember"}
    first = chat(served, {"messages": [message], "thread_id": "new"})
    assert [r["stdout"] for r in results(first)] == [
        "written\n",
        "['main.py', 'notes.txt', 'output'] kept between calls\n",
    ]

    thread_id = first[0]["thread_id"]
    llm.script(*code_calls(read), Reply(text="still there"))
    again = chat(served, {"messages": [message], "thread_id": thread_id})
    assert results(again)[0]["stdout"] == "['main.py', 'notes.txt', 'output'] kept between calls\n"

    listing = "import os\nprint(sorted(os.listdir('.')))"
    llm.script(*code_calls(listing), Reply(text="empty"))
    elsewhere = chat(served, {"messages": [message]})  # another run: a directory of its own
    assert results(elsewhere)[0]["stdout"] == "['main.py', 'output']\n"


def test_too_many_files_or_a_huge_file_is_stopped_and_the_run_goes_on(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    keep = "open('keep.txt', 'w').write('x')"
    flood = "import os\nos.makedirs('many')\nfor i in range(10_000):\n    open(f'many/{i}', 'w')"
    huge = "f = open('big.bin', 'wb')\nfor _ in range(1024):\n    f.write(bytes(2**20))"
    listing = "import os\nprint(sorted(os.listdir('.')))"
    llm.script(*code_calls(keep, flood, huge, listing), Reply(text="I could not do that."))
    events = chat(served, {"messages": [{"role": "user", "content": "fill the disk"}]})

    kept, flooded, filled, listed = results(events)
    assert kept["exit_code"] == 0
    assert flooded["exit_code"] == 0
    assert any("left 10,001 files" in note for note in flooded["notes"]), flooded["notes"]
    assert filled["exit_code"] != 0
    assert any("size limit" in note for note in filled["notes"]), filled["notes"]
    assert listed["stdout"] == "['keep.txt', 'main.py', 'output']\n", "as it was"
    assert events[-1]["type"] == "done"
    assert events[-1]["text"] == "I could not do that."


def test_an_attachment_named_like_a_path_stays_inside(
    served: ThreadedApp, llm: ScriptedLLM
) -> None:
    probe = (
        "import os\n"
        "print(sorted(os.listdir('.')), open('passwd').read())\n"
        "print('sneaky' in open('/etc/passwd').read() if os.path.exists('/etc/passwd') else '-')"
    )
    llm.script(*code_calls(probe), Reply(text="ok"))
    sneaky = {"name": "../../etc/passwd", "data": base64.b64encode(b"sneaky").decode()}
    message = {"role": "user", "content": "look"}
    events = chat(served, {"messages": [message], "attachments": [sneaky]})

    [result] = results(events)
    assert result["stdout"] == "['main.py', 'output', 'passwd'] sneaky\n-\n"
    assert "sneaky" not in Path("/etc/passwd").read_text()
