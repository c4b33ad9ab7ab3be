"""truncate_middle and ToolResult.render: what the model reads back from a tool."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agentloop.tools.results import ToolResult, truncate_middle

MARKER = re.compile(r"\n\[\.\.\. (\d+) of (\d+) characters cut \.\.\.\]\n")

# Texts whose JSON form is longer than the text itself, and one that is not.
TEXTS: dict[str, str] = {
    "plain": "lorem ipsum dolor sit amet " * 2_000,
    "quotes": 'say "hi" ' * 5_000,
    "newlines": "line\n" * 10_000,
    "backslashes": "C:\\path\\to\\file " * 3_000,
    "non_ascii": "héllo wörld 漢字 😀 " * 3_000,
    "all_escaped": '"\\\n\t' * 5_000,
    "mixed": 'start "q" \\ é\n漢 ' * 3_000 + "THE END",
}


def parse_marker(text: str) -> tuple[int, int, str, str]:
    """(cut, total, head, tail) of a truncated text."""
    match = MARKER.search(text)
    assert match, f"no truncation marker in {text[:80]!r}..."
    return int(match[1]), int(match[2]), text[: match.start()], text[match.end() :]


# --- truncate_middle ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "short", "x" * 100])
def test_text_within_the_limit_is_unchanged(text: str) -> None:
    assert truncate_middle(text, 100) is text


def test_long_text_keeps_head_and_tail_and_names_the_cut() -> None:
    text = "HEAD-" + "m" * 9_990 + "-TAIL"

    out = truncate_middle(text, 1_000)

    assert len(out) <= 1_000
    assert out.startswith("HEAD-")
    assert out.endswith("-TAIL")
    _, total, head, tail = parse_marker(out)
    assert total == 10_000
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) > len(tail) > 0, "the head gets the larger share"
    assert "characters cut" in out


def test_the_named_cut_is_what_was_actually_removed() -> None:
    text = "x" * 10_000

    out = truncate_middle(text, 1_000)

    cut, total, head, tail = parse_marker(out)
    assert len(head) + len(tail) + cut == total


# --- ToolResult.render: small results and errors -----------------------------------------------


def test_ok_small_result_is_exact_json() -> None:
    result = ToolResult(ok=True, result={"city": "Paris", "temp": 21.5, "tags": ["a", "b"]})

    assert result.render(1_000) == (
        '{"ok": true, "result": {"city": "Paris", "temp": 21.5, "tags": ["a", "b"]}}'
    )


def test_ok_result_keeps_non_ascii_unescaped() -> None:
    assert ToolResult(ok=True, result="héllo 漢字").render(1_000) == (
        '{"ok": true, "result": "héllo 漢字"}'
    )


def test_ok_result_of_none() -> None:
    assert ToolResult(ok=True).render(1_000) == '{"ok": true, "result": null}'


def test_result_exactly_at_the_limit_is_not_truncated() -> None:
    full = ToolResult(ok=True, result="x" * 500).render(10_000)

    assert ToolResult(ok=True, result="x" * 500).render(len(full)) == full
    assert "truncated" not in json.loads(full)


def test_error_without_hint() -> None:
    assert ToolResult.failure("city not found").render(1_000) == (
        '{"ok": false, "error": "city not found"}'
    )


def test_error_with_hint() -> None:
    rendered = ToolResult.failure("city not found", hint="try the English name").render(1_000)

    assert rendered == '{"ok": false, "error": "city not found", "hint": "try the English name"}'


def test_a_long_error_is_truncated_but_still_valid_json() -> None:
    rendered = ToolResult.failure("E" * 50_000).render(8_000)

    body = json.loads(rendered)
    assert body["ok"] is False
    assert len(body["error"]) <= 2_000
    assert "characters cut" in body["error"]


# --- ToolResult.render: results too big for max_chars ------------------------------------------


def huge_dict(text: str) -> dict[str, Any]:
    return {
        "title": text[:200],
        "body": text,
        "items": [{"n": i, "s": text[:50]} for i in range(50)],
    }


@pytest.mark.parametrize("max_chars", [200, 1_000, 8_000])
@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_huge_string_result_fits_max_chars(kind: str, max_chars: int) -> None:
    text = TEXTS[kind]

    rendered = ToolResult(ok=True, result=text).render(max_chars)

    assert len(rendered) <= max_chars
    body = json.loads(rendered)
    assert body["ok"] is True
    assert body["truncated"] is True
    _, total, head, tail = parse_marker(body["result"])
    assert total == len(text)
    assert text.startswith(head)
    assert text.endswith(tail)


@pytest.mark.parametrize("max_chars", [200, 1_000, 8_000])
@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_huge_dict_result_fits_max_chars(kind: str, max_chars: int) -> None:
    value = huge_dict(TEXTS[kind])
    compact = json.dumps(value, ensure_ascii=False)

    rendered = ToolResult(ok=True, result=value).render(max_chars)

    assert len(rendered) <= max_chars
    body = json.loads(rendered)
    assert body["ok"] is True
    assert body["truncated"] is True
    assert isinstance(body["result"], str), "a truncated result is carried as text"
    _, total, head, tail = parse_marker(body["result"])
    assert total == len(compact)
    assert compact.startswith(head)
    assert compact.endswith(tail)


def test_huge_result_of_a_non_json_type_is_rendered_as_text() -> None:
    value = {"items": [object() for _ in range(2_000)]}

    rendered = ToolResult(ok=True, result=value).render(1_000)

    assert len(rendered) <= 1_000
    body = json.loads(rendered)
    assert body["truncated"] is True
    assert "<object object at" in body["result"]


def test_small_max_chars_still_bounds_escaped_text() -> None:
    rendered = ToolResult(ok=True, result='"' * 20_000).render(150)

    assert json.loads(rendered)["truncated"] is True
    assert len(rendered) <= 150
