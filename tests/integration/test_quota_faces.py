"""What clients see of per-principal limits: the OpenAI faces' 429s as the openai SDK knows
them (``insufficient_quota`` not retried, ``rate_limit_exceeded`` retried after Retry-After),
the ``x-ratelimit-*`` headers on every run-starting answer, and ``GET /v1/usage``.

The app runs on a loopback port with the scripted model behind it and the quota on SQLite,
its clock injected. A scripted call costs $0.01 (1000 tokens of ``groq:m`` at $10 per million).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agentloop.auth import BearerAuth, hash_token
from agentloop.pricing import PriceOverride
from agentloop.quota import LimitsConfig, Quota
from agentloop.store import Store
from tests.fakes.scripted_llm import Reply, ScriptedLLM
from tests.helpers import TEST_CONFIG
from tests.served import AUTH, TOKEN, ServedApp, make_service
from tests.store_backends import START, Clock, sqlite_store

CONFIG = TEST_CONFIG.model_copy(
    update={"prices": {"groq:m": PriceOverride(input=10, output=10)}, "default_model": "groq:m"}
)
HI = [{"role": "user", "content": "hi"}]
MIDNIGHT = int(START) - int(START) % 86_400 + 86_400


class Served(ServedApp):
    """The app with a quota; counts the requests its openai clients send."""

    sent: list[Any]
    """The requests the last ``openai()`` client sent (its retries included)."""

    def openai(self, max_retries: int = 0) -> openai.OpenAI:
        self.sent = []
        http = openai.DefaultHttpxClient(event_hooks={"request": [self.sent.append]})
        return openai.OpenAI(
            base_url=f"{self.url}/v1", api_key=TOKEN, max_retries=max_retries, http_client=http
        )

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=20) as client:
            return client.post(path, json=body, headers=AUTH)

    def get(self, path: str, headers: dict[str, str] = AUTH) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=20) as client:
            return client.get(path, headers=headers)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Store:
    return sqlite_store(tmp_path / "store.db", clock)


def serve(store: Store, clock: Clock, **limits: float) -> Served:
    """The app under ``limits`` (none given: no limits, no quota)."""
    service = make_service(config=CONFIG)
    service.authenticate = _auth()
    if limits:
        config = LimitsConfig.parse(json.dumps({"default": limits}))
        service.quota = Quota(config, store, clock)
    return Served(service, name="quota-faces")


def _auth() -> Any:
    from agentloop.server.identity import api_keys

    hashes = [hash_token(TOKEN)]
    return api_keys(BearerAuth(lambda: hashes))


def one_call(llm: ScriptedLLM) -> None:
    llm.respond_with(lambda _: Reply(text="ok", usage=(800, 200)))


def complete(client: openai.OpenAI) -> Any:
    return client.chat.completions.create(model="groq:m", messages=HI)  # type: ignore[arg-type]


# -- the OpenAI faces' refusals -------------------------------------------------------------


def test_a_spent_day_is_insufficient_quota_and_not_retried(
    store: Store, clock: Clock, llm: ScriptedLLM
) -> None:
    """The day's $0.01 spent: OpenAI's insufficient_quota, which the SDK does not retry (a
    retry cannot pass before midnight), with Retry-After until then."""
    one_call(llm)
    with serve(store, clock, usd_per_day=0.01) as served:
        client = served.openai(max_retries=1)
        assert complete(client).choices[0].message.content == "ok"
        with pytest.raises(openai.RateLimitError) as caught:
            complete(client)
    error = caught.value
    assert error.code == "insufficient_quota"
    assert error.body == {
        "message": error.body["message"],  # type: ignore[index]
        "type": "insufficient_quota",
        "param": "usd_per_day",
        "code": "insufficient_quota",
    }
    assert error.response.headers["x-should-retry"] == "false"
    assert int(error.response.headers["retry-after"]) == MIDNIGHT - int(START)
    assert len(served.sent) == 2, "the refusal was not retried"
    assert len(llm.requests) == 1


def test_a_rate_limit_is_retried_after_its_retry_after(
    store: Store, clock: Clock, llm: ScriptedLLM
) -> None:
    """One request a minute, the second a second before the minute ends: rate_limit_exceeded
    with Retry-After 1; the SDK waits and tries again, which passes in the next minute."""
    one_call(llm)
    clock.now = START + 59
    with serve(store, clock, requests_per_minute=1) as served:
        complete(served.openai())
        with pytest.raises(openai.RateLimitError) as caught:
            complete(served.openai(max_retries=0))
        error = caught.value
        assert error.code == "rate_limit_exceeded"
        assert error.body["type"] == "requests"  # type: ignore[index]
        assert error.body["param"] == "requests_per_minute"  # type: ignore[index]
        assert error.response.headers["retry-after"] == "1"
        assert "x-should-retry" not in error.response.headers

        def next_minute_on_retry(request: Any) -> None:
            if len(served.sent) == 2:  # the first try was refused: its retry is next minute
                clock.now = START + 61

        client = served.openai(max_retries=1)
        client._client.event_hooks["request"].append(next_minute_on_retry)
        assert complete(client).choices[0].message.content == "ok"
    assert len(served.sent) == 2, "refused once, then retried"
    assert len(llm.requests) == 2


def test_the_responses_face_says_insufficient_quota(
    store: Store, clock: Clock, llm: ScriptedLLM
) -> None:
    with serve(store, clock, usd_per_day=0) as served:
        client = served.openai(max_retries=1)
        with pytest.raises(openai.RateLimitError) as caught:
            client.responses.create(model="groq:m", input="hi")
    assert caught.value.code == "insufficient_quota"
    assert len(served.sent) == 1
    assert llm.requests == []


def test_chat_keeps_its_own_error_shape(store: Store, clock: Clock) -> None:
    """/chat's clients read ``type`` (the status stays in ``code``)."""
    with serve(store, clock, usd_per_day=0) as served:
        answer = served.post("/chat", {"model": "groq:m", "messages": HI})
    assert answer.status_code == 429
    assert answer.json()["error"]["type"] == "quota_exceeded"
    assert answer.json()["error"]["code"] == 429


# -- x-ratelimit-* --------------------------------------------------------------------------

LIMITS = {
    "usd_per_day": 1,
    "tokens_per_day": 100_000,
    "requests_per_minute": 10,
    "concurrent_runs": 2,
}
RUN = {"token_budget": 20_000, "max_cost_usd": 0.05}
"""A run reserves 20,000 tokens and $0.05 (its budget priced at $10 per million: $0.20)."""


def ratelimits(response: httpx.Response | Any) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("x-ratelimit-")}


def test_chat_answers_carry_each_limit_as_the_admission_left_it(
    store: Store, clock: Clock, llm: ScriptedLLM
) -> None:
    """Each run's reservation comes off what remains; the first run's unspent part is back
    by the second (it spent $0.01 and 1000 tokens)."""
    one_call(llm)
    with serve(store, clock, **LIMITS) as served:
        first = served.post("/chat", {"model": "groq:m", "messages": HI, **RUN})
        second = served.post("/chat", {"model": "groq:m", "messages": HI, **RUN})
    assert first.status_code == second.status_code == 200
    day, minute = f"{MIDNIGHT - int(START)}s", "60s"
    assert ratelimits(first) == {
        "x-ratelimit-limit-usd-per-day": "1",
        "x-ratelimit-remaining-usd-per-day": "0.95",
        "x-ratelimit-reset-usd-per-day": day,
        "x-ratelimit-limit-tokens-per-day": "100000",
        "x-ratelimit-remaining-tokens-per-day": "80000",
        "x-ratelimit-reset-tokens-per-day": day,
        "x-ratelimit-limit-requests-per-minute": "10",
        "x-ratelimit-remaining-requests-per-minute": "9",
        "x-ratelimit-reset-requests-per-minute": minute,
        "x-ratelimit-limit-concurrent-runs": "2",
        "x-ratelimit-remaining-concurrent-runs": "1",
    }
    assert ratelimits(second)["x-ratelimit-remaining-usd-per-day"] == "0.94"
    assert ratelimits(second)["x-ratelimit-remaining-tokens-per-day"] == "79000"
    assert ratelimits(second)["x-ratelimit-remaining-requests-per-minute"] == "8"
    assert ratelimits(second)["x-ratelimit-remaining-concurrent-runs"] == "1"


def test_openai_answers_and_refusals_carry_them(
    store: Store, clock: Clock, llm: ScriptedLLM
) -> None:
    """A completion (JSON and streamed) carries them; a refusal names its limit's."""
    one_call(llm)
    clock.now = START + 30
    extra = {"agentloop": RUN}
    with serve(store, clock, requests_per_minute=2, usd_per_day=1) as served:
        client = served.openai()
        raw = client.chat.completions.with_raw_response.create(
            model="groq:m",
            messages=HI,  # type: ignore[arg-type]
            extra_body=extra,
        )
        with client.chat.completions.with_streaming_response.create(
            model="groq:m",
            messages=HI,  # type: ignore[arg-type]
            stream=True,
            extra_body=extra,
        ) as streamed:
            streamed_headers = ratelimits(streamed)
        with pytest.raises(openai.RateLimitError) as caught:
            complete(client)
    assert ratelimits(raw) == {
        "x-ratelimit-limit-requests-per-minute": "2",
        "x-ratelimit-remaining-requests-per-minute": "1",
        "x-ratelimit-reset-requests-per-minute": "30s",
        "x-ratelimit-limit-usd-per-day": "1",
        "x-ratelimit-remaining-usd-per-day": "0.95",
        "x-ratelimit-reset-usd-per-day": f"{MIDNIGHT - int(START) - 30}s",
    }
    assert streamed_headers["x-ratelimit-remaining-requests-per-minute"] == "0"
    assert streamed_headers["x-ratelimit-remaining-usd-per-day"] == "0.94"
    assert ratelimits(caught.value.response) == {
        "x-ratelimit-limit-requests-per-minute": "2",
        "x-ratelimit-remaining-requests-per-minute": "0",
        "x-ratelimit-reset-requests-per-minute": "30s",
    }


def test_no_limits_no_headers(store: Store, clock: Clock, llm: ScriptedLLM) -> None:
    one_call(llm)
    with serve(store, clock) as served:
        answer = served.post("/chat", {"model": "groq:m", "messages": HI})
    assert answer.status_code == 200
    assert ratelimits(answer) == {}


# -- GET /v1/usage --------------------------------------------------------------------------


def test_usage_reports_the_callers_limits(store: Store, clock: Clock, llm: ScriptedLLM) -> None:
    one_call(llm)
    clock.now = START + 30
    with serve(store, clock, **LIMITS) as served:
        assert served.post("/chat", {"model": "groq:m", "messages": HI}).status_code == 200
        answer = served.get("/v1/usage")
        stranger = served.get("/v1/usage", {"authorization": "Bearer al_nobody"})
    assert answer.status_code == 200, answer.text
    day = {"reset_at": MIDNIGHT, "reset_in_s": MIDNIGHT - int(START) - 30}
    assert answer.json() == {
        "limited": True,
        "limits": {
            "usd_per_day": {"limit": 1, "used": 0.01, "remaining": 0.99, **day},
            "tokens_per_day": {"limit": 100_000, "used": 1000, "remaining": 99_000, **day},
            "requests_per_minute": {
                "limit": 10,
                "used": 1,
                "remaining": 9,
                "reset_at": int(START) + 60,
                "reset_in_s": 30,
            },
            "concurrent_runs": {
                "limit": 2,
                "used": 0,
                "remaining": 2,
                "reset_at": None,
                "reset_in_s": None,
            },
        },
    }
    assert stranger.status_code == 401


def test_usage_without_limits_is_not_a_404(store: Store, clock: Clock) -> None:
    with serve(store, clock) as served:
        answer = served.get("/v1/usage")
    assert answer.status_code == 200
    assert answer.json() == {"limited": False, "limits": {}}


def test_usage_with_the_store_down_is_a_503(tmp_path: Path, clock: Clock) -> None:
    (tmp_path / "file").write_text("not a directory")
    down = sqlite_store(tmp_path / "file" / "store.db", clock)  # cannot be opened
    with serve(down, clock, usd_per_day=1) as served:
        answer = served.get("/v1/usage")
    assert answer.status_code == 503
    assert answer.json()["error"]["type"] == "store_unavailable"
    assert answer.headers["retry-after"]
