"""The history window (``context.py``): what the model is sent, against what it promises.

Promises checked: the run's own history is never changed; tool results of earlier rounds
become previews, the latest round's stay whole; over the bound the oldest exchanges go
whole (a tool call never without its results, a result never without its call) behind a
note that counts against the bound; the system prompt, the last user message and the
latest exchange always stay; the view fits the bound unless those alone do not; and its
measure (a call's token estimate) is its JSON's length.
The last test drives the window through a real run against the scripted model server.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agentloop.context import CompactionSettings, Prompt, compact_view, measured_view
from tests.fakes.scripted_llm import Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, run_chat, tool_payload
from tests.sample_tools import big

Wire = dict[str, Any]
SYSTEM: Wire = {"role": "system", "content": "You are terse."}
NOTE_END = "earlier messages of this conversation were left out to fit the context window.]"


def user(text: str) -> Wire:
    return {"role": "user", "content": text}


def answer(text: str) -> Wire:
    return {"role": "assistant", "content": text}


def round_of(tag: str, results: list[str]) -> list[Wire]:
    """An assistant turn calling one tool per result, then the results in order."""
    ids = [f"call_{tag}_{i}" for i in range(len(results))]
    calls = [
        {"id": i, "type": "function", "function": {"name": "echo", "arguments": "{}"}} for i in ids
    ]
    turn: Wire = {"role": "assistant", "content": None, "tool_calls": calls}
    return [
        turn,
        *(
            {"role": "tool", "tool_call_id": i, "content": r}
            for i, r in zip(ids, results, strict=True)
        ),
    ]


def size(messages: list[Wire]) -> int:
    """The measure the bound is in: characters of each message's JSON."""
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)


def is_note(message: Wire) -> bool:
    return message["role"] == "system" and str(message["content"]).endswith(NOTE_END)


def note_count(view: list[Wire]) -> int:
    notes = [m for m in view if is_note(m)]
    assert len(notes) <= 1
    return int(notes[0]["content"].split()[0].lstrip("[")) if notes else 0


def assert_pairs_whole(view: list[Wire]) -> None:
    """Every tool result follows the turn that called it; every call has its result."""
    open_calls: set[str] = set()
    for message in view:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan result {message}"
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, f"calls without results: {open_calls}"
        open_calls = {c["id"] for c in message.get("tool_calls") or []}
    assert not open_calls, f"calls without results: {open_calls}"


def conversation() -> list[Wire]:
    """Three questions, each answered after a round of tools, then a fourth question."""
    history: list[Wire] = [SYSTEM]
    for n in range(3):
        history += [user(f"question {n}"), *round_of(f"q{n}", [f"{n}" * 300] * 3)]
        history.append(answer(f"answer {n}"))
    return [*history, user("question 3")]


# -- under the bound ---------------------------------------------------------------------------


def test_under_the_bound_the_view_is_the_history_and_the_history_is_not_changed() -> None:
    wire = conversation()
    kept = copy.deepcopy(wire)
    view = compact_view(wire, CompactionSettings(preview_chars=10_000))
    assert view == wire
    assert wire == kept
    compact_view(wire, CompactionSettings(preview_chars=20, max_chars=1_000))
    assert wire == kept, "the run keeps every message in full; only the view is cut"


def test_earlier_rounds_become_previews_and_the_latest_round_stays_whole() -> None:
    long, short = "x" * 1_000, "y" * 150  # 150 <= preview + 80: too short to reduce
    wire = [
        SYSTEM,
        user("go"),
        *round_of("a", [long, short]),
        *round_of("b", [long]),
        *round_of("c", [long, long]),
    ]
    view = compact_view(wire, CompactionSettings(preview_chars=100))

    assert view[0] is wire[0]
    assert [m["role"] for m in view] == [m["role"] for m in wire]
    results = [m["content"] for m in view if m["role"] == "tool"]
    assert results[1] == short
    assert results[3:] == [long, long], "the round the model is about to read stays whole"
    for reduced in (results[0], results[2]):
        value = json.loads(reduced)
        assert value["compacted"] is True
        assert value["preview"] == "x" * 100
        assert "1000 characters" in value["note"]
    assert all(view[i] is wire[i] for i, m in enumerate(wire) if m["role"] != "tool")


def test_a_reduced_result_is_the_same_on_every_turn_so_the_prefix_is_cached() -> None:
    """Each turn's view starts with the previous turn's, up to that turn's newest results
    (which are reduced once a newer round exists, and stay reduced the same way)."""
    settings = CompactionSettings(preview_chars=50)
    wire = [SYSTEM, user("research this")]
    previous: list[Wire] | None = None
    for turn in range(6):
        wire += round_of(f"t{turn}", [f"result {turn} " * 80, f"other {turn} " * 80])
        view = compact_view(wire, settings)
        if previous is not None:
            stable = len(previous) - 2  # the previous turn's two results were still whole
            assert json.dumps(view[:stable]) == json.dumps(previous[:stable])
        previous = view


# -- over the bound ----------------------------------------------------------------------------


@pytest.mark.parametrize("max_chars", range(1_000, 6_000, 97))
def test_over_the_bound_the_oldest_exchanges_go_whole_and_the_rest_fits(max_chars: int) -> None:
    wire = conversation()
    full = compact_view(wire, CompactionSettings(preview_chars=50, max_chars=10**9))
    view = compact_view(wire, CompactionSettings(preview_chars=50, max_chars=max_chars))

    assert view[0] is wire[0]
    assert view[-1] == user("question 3")
    history = [m for m in view[1:] if not is_note(m)]
    assert history == full[len(full) - len(history) :], "only the oldest are left out"
    assert note_count(view) == len(full) - 1 - len(history)
    assert_pairs_whole(history)
    if len(history) < len(full) - 1:
        assert is_note(view[1])
    assert size(view) <= max_chars, "the note counts against the bound too"


@pytest.mark.parametrize("max_chars", range(1_000, 3_000, 53))
def test_a_long_run_on_one_question_leaves_out_its_own_early_rounds(max_chars: int) -> None:
    """One question, many rounds: the question and the latest round stay, the rounds
    between them go oldest first, and the view fits."""
    wire = [SYSTEM, user("the one question")]
    for turn in range(12):
        wire += round_of(f"r{turn}", [f"{turn}" * 200, f"{turn}" * 200])
    latest = wire[-3:]
    view = compact_view(wire, CompactionSettings(preview_chars=50, max_chars=max_chars))

    assert view[:3] == [SYSTEM, view[1], user("the one question")]
    assert is_note(view[1])
    assert view[-3:] == latest, "the latest round's results stay whole"
    assert_pairs_whole(view[2:])
    assert note_count(view) == len(wire) - len(view) + 1
    least = [*view[:3], *latest]
    if size(least) > max_chars:
        assert view == least, "when even the least that is kept is over, nothing else stays"
    else:
        assert size(view) <= max_chars


def test_the_last_user_message_stays_even_when_it_alone_is_over_the_bound() -> None:
    huge = user("q" * 50_000)
    wire = [*conversation()[:-1], huge]
    view = compact_view(wire, CompactionSettings(max_chars=2_000))
    assert view == [SYSTEM, view[1], huge]
    assert note_count(view) == len(wire) - 2


def test_a_single_huge_message_is_sent_as_it_is_with_no_note() -> None:
    wire = [SYSTEM, user("q" * 50_000)]
    assert compact_view(wire, CompactionSettings(max_chars=1_000)) == wire


def test_the_latest_exchange_stays_whole_even_when_it_alone_is_over_the_bound() -> None:
    """Its results go with it: a call is never sent without them, nor they without it."""
    latest = round_of("now", ["z" * 3_000, "z" * 3_000, "z" * 3_000])
    wire = [SYSTEM, user("old"), answer("old answer"), user("now"), *round_of("a", ["a"]), *latest]
    view = compact_view(wire, CompactionSettings(max_chars=2_000))
    assert view == [SYSTEM, view[1], user("now"), *latest]
    assert note_count(view) == 4


def test_every_bound_between_two_results_of_one_turn_leaves_them_together() -> None:
    """Sweep the bound across every character of a turn with three calls: the turn and its
    three results are kept together or left out together, whatever the cut."""
    wire = [SYSTEM, user("first"), *round_of("p", ["p" * 400] * 3), user("second")]
    whole = size(wire)
    for max_chars in range(size([SYSTEM, user("second")]), whole + 1, 7):
        view = compact_view(
            wire, CompactionSettings(preview_chars=10_000, max_chars=max(max_chars, 1))
        )
        assert_pairs_whole([m for m in view[1:] if not is_note(m)])
        calls = [m for m in view if m.get("tool_calls")]
        results = [m for m in view if m["role"] == "tool"]
        assert (len(calls), len(results)) in {(0, 0), (1, 3)}


def test_a_system_prompt_over_the_bound_stays_first_and_whole() -> None:
    system: Wire = {"role": "system", "content": "s" * 5_000}
    wire = [system, *conversation()[1:]]
    view = compact_view(wire, CompactionSettings(max_chars=2_000))
    assert view[0] is system
    assert view[1:] == [view[1], user("question 3")]
    assert is_note(view[1])


def test_harder_settings_halve_the_window_and_shorten_previews() -> None:
    settings = CompactionSettings(preview_chars=400, max_chars=400_000)
    assert settings.harder() == CompactionSettings(preview_chars=120, max_chars=200_000)
    assert CompactionSettings(preview_chars=50).harder().preview_chars == 50


# -- the view's measure --------------------------------------------------------------------------


@pytest.mark.parametrize("max_chars", [10**9, *range(1_000, 6_000, 331)])
def test_the_measured_view_counts_exactly_what_it_sends(max_chars: int) -> None:
    """A call's token estimate reuses the sizes the window measured: they must add up to the
    view's JSON exactly, windowed or not, with a message added after it (the forced answer's
    instruction) and with text that is not ASCII."""
    wire = [*conversation(), answer('résumé \u202e\U0001f600 "quoted" \\ end')]
    prompt = measured_view(wire, CompactionSettings(preview_chars=50, max_chars=max_chars))

    assert prompt.messages == compact_view(wire, CompactionSettings(50, max_chars))
    assert prompt.chars == len(json.dumps(prompt.messages, ensure_ascii=False))
    more = prompt.plus([user("ünïcode"), user("")])
    assert more.chars == len(json.dumps(more.messages, ensure_ascii=False))
    assert Prompt.of([]).chars == len("[]")
    assert Prompt.of(wire).chars == len(json.dumps(wire, ensure_ascii=False))


# -- through a run -----------------------------------------------------------------------------


async def test_every_request_of_a_long_run_fits_the_configured_window(
    llm: ScriptedLLM, model: str
) -> None:
    """A real run: eight rounds of 900-character results under a 3,000-character window.
    Every request the model gets starts with the system prompt and the question, ends with
    the latest round whole, fits the window, and the run still gets its answer."""
    rounds = 8
    llm.script(*[Reply(tool_calls=[call("big", n=900)])] * rounds, Reply(text="Enough."))
    config = TEST_CONFIG.model_copy(update={"context_max_chars": 3_000, "tool_preview_chars": 100})

    result = await run_chat("Read a lot.", model=model, tools=[big], config=config)

    assert result.done.text == "Enough."
    assert len(llm.requests) == rounds + 1
    assert len([m for m in result.done.messages if m.role == "tool"]) == rounds
    for req in llm.requests:
        sent = req.messages
        assert sent[0]["role"] == "system"
        assert [m["content"] for m in sent if m["role"] == "user"] == ["Read a lot."]
        assert size(sent) <= 3_000
        assert_pairs_whole([m for m in sent[1:] if not is_note(m)])
        if sent[-1]["role"] == "tool":
            assert tool_payload(sent[-1]["content"])["result"] == big_text(900)
    assert any(is_note(m) for m in llm.requests[-1].messages), "the window was used"


def big_text(n: int) -> str:
    return "".join(chr(ord("a") + i % 26) for i in range(n))
