"""The per-tool call counter and the server's ``AGENTLOOP_TOOL_LIMITS`` setting."""

from __future__ import annotations

import pytest

from agentloop.config import AgentConfig, ConfigurationError
from agentloop.limits import TokenBudget, ToolCallLimits
from agentloop.models import RunProgress


def test_a_limited_tool_runs_up_to_its_limit_and_others_are_not_counted() -> None:
    calls = ToolCallLimits({"execute_code": 2, "scrape": 0})
    assert [calls.take("execute_code") for _ in range(3)] == [None, None, 2]
    assert calls.take("scrape") == 0
    assert [calls.take("search_web") for _ in range(50)] == [None] * 50
    assert calls.used == {"execute_code": 2}


def test_a_continued_run_goes_on_from_its_count() -> None:
    calls = ToolCallLimits({"execute_code": 2}, used={"execute_code": 1, "gone": 7})
    assert calls.used == {"execute_code": 1}, "a tool no longer limited is not carried"
    assert [calls.take("execute_code") for _ in range(2)] == [None, 2]


def test_sub_budgets_reach_the_roots_counter() -> None:
    root = TokenBudget(10_000)
    root.tool_calls = ToolCallLimits({"scrape": 1})
    child = root.share(1_000).share(100)
    assert child.root.tool_calls is root.tool_calls


def test_progress_bounds_its_counts() -> None:
    assert RunProgress.model_validate({"tool_calls": {"scrape": 3}}).tool_calls == {"scrape": 3}
    for bad in ({"scrape": -1}, {"": 1}, {f"t{i}": 1 for i in range(101)}):
        with pytest.raises(ValueError, match="tool_calls"):
            RunProgress.model_validate({"tool_calls": bad})
    assert RunProgress().tool_calls == {}, "a token from before the field still reads"


def test_the_server_setting_is_json() -> None:
    env = {"AGENTLOOP_TOOL_LIMITS": '{"execute_code": 5, "scrape": 0}'}
    assert AgentConfig.from_env(env).tool_limits == {"execute_code": 5, "scrape": 0}
    assert AgentConfig.from_env({}).tool_limits == {}


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("execute_code=5", "AGENTLOOP_TOOL_LIMITS is not JSON"),
        ('["execute_code"]', "tool_limits"),
        ('{"execute_code": -1}', "greater than or equal to 0"),
        ('{"execute_code": 10001}', "less than or equal to 10000"),
        ('{"execute_code": 2.5}', "tool_limits"),
        ('{"": 1}', "at least 1 character"),
    ],
)
def test_a_bad_server_setting_is_a_configuration_error(raw: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        AgentConfig.from_env({"AGENTLOOP_TOOL_LIMITS": raw})
