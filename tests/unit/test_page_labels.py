"""The chat page labels every stop reason and error code the server can send.

The page is plain JavaScript and cannot import the Python types, so this keeps its two label
maps in step with ``StopReason`` and ``ErrorCode``: a new value on either side fails here
instead of showing up as a raw identifier on the page.
"""

from __future__ import annotations

import re
from typing import get_args

from agentloop.events import ErrorCode
from agentloop.models import StopReason
from tests.helpers import ROOT

LABELS_JS = (ROOT / "functions" / "chat" / "static" / "labels.js").read_text()


def js_object_keys(name: str) -> set[str]:
    match = re.search(rf"const {name} = \{{(.*?)\}};", LABELS_JS, re.DOTALL)
    assert match, f"{name} not found in labels.js"
    return set(re.findall(r"^\s*([a-z_]+):", match.group(1), re.MULTILINE))


def test_every_stop_reason_has_a_label() -> None:
    assert js_object_keys("STOP_REASONS") == set(get_args(StopReason))


def test_every_error_code_has_a_label() -> None:
    assert js_object_keys("ERROR_CODES") == set(get_args(ErrorCode))
