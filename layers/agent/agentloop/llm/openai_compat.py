"""One adapter for both SDKs: Groq's and OpenAI's async clients share the wire format.

What differs between them is small and handled here: where usage arrives (OpenAI:
a last chunk with empty ``choices`` when ``stream_options.include_usage`` is set;
Groq: ``x_groq.usage`` on the finishing chunk) and the module holding the error
classes, which is passed in so this file imports neither SDK.
"""

from __future__ import annotations

import dataclasses
import email.utils
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from agentloop.llm.base import ErrorKind, ModelCall, ModelTurn, ProviderError, TextSink
from agentloop.llm.untrusted import RawCall, check_calls, clean_finish_reason, clean_text
from agentloop.models import Usage


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAssembler:
    """Builds a :class:`ModelTurn` from chunks: text, tool calls keyed by ``index``, usage.

    Ids and names arrive once, arguments in pieces, and fragments of parallel calls
    interleave; the ``index`` is the only reliable key.
    """

    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None

    def feed(self, chunk: Any) -> str:
        """Take one chunk; returns its text delta ('' if none)."""
        delta_text = ""
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    delta_text += clean_text(delta.content)
                for fragment in delta.tool_calls or ():
                    self._feed_call(fragment)
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        usage = _usage_of(chunk)
        if usage is not None:
            self.usage = usage
        if delta_text:
            self.text.append(delta_text)
        return delta_text

    def _feed_call(self, fragment: Any) -> None:
        partial = self.calls.setdefault(fragment.index, _PartialCall())
        if isinstance(fragment.id, str) and fragment.id and not partial.id:
            partial.id = fragment.id
        function = fragment.function
        if function is not None:
            if isinstance(function.name, str) and function.name and not partial.name:
                partial.name = function.name
            if isinstance(function.arguments, str) and function.arguments:
                partial.arguments.append(function.arguments)

    def turn(self) -> ModelTurn:
        """The turn, with the model's tool calls checked (they are untrusted input)."""
        checked = check_calls(
            [
                RawCall(partial.id, partial.name, "".join(partial.arguments))
                for _, partial in sorted(self.calls.items())
            ]
        )
        return ModelTurn(
            text="".join(self.text),
            tool_calls=[item.call for item in checked],
            finish_reason=clean_finish_reason(self.finish_reason),
            usage=self.usage,
            call_problems={item.call.id: item.problem for item in checked if item.problem},
        )


def _usage_of(chunk: Any) -> Usage | None:
    raw = getattr(chunk, "usage", None)
    if raw is None:
        x_groq = getattr(chunk, "x_groq", None)
        raw = getattr(x_groq, "usage", None) if x_groq is not None else None
    if raw is None:
        return None
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(
        prompt_tokens=raw.prompt_tokens or 0,
        completion_tokens=raw.completion_tokens or 0,
        cached_tokens=cached or 0,
    )


class OpenAICompatibleModel:
    """A :class:`~agentloop.llm.base.ChatModel` over an OpenAI-style async SDK client."""

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        client: Any,
        sdk: ModuleType,
        key_env: str,
        asks_for_usage: bool,
    ) -> None:
        self.provider = provider
        self.model = model
        self._client = client
        self._sdk = sdk
        self._key_env = key_env
        self._asks_for_usage = asks_for_usage

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    async def complete(self, call: ModelCall, on_text: TextSink) -> ModelTurn:
        kwargs: dict[str, Any] = {
            **call.fields,
            "model": self.model,
            "messages": call.messages,
            "stream": True,
            "timeout": call.timeout,
        }
        if self._asks_for_usage:  # OpenAI; Groq's SDK has no such argument and uses x_groq
            kwargs["stream_options"] = {"include_usage": True}
        if call.tools:
            kwargs["tools"] = call.tools
            if call.tool_choice is not None:
                kwargs["tool_choice"] = call.tool_choice
        if call.max_tokens is not None:
            kwargs["max_completion_tokens"] = call.max_tokens
        assembler = StreamAssembler()
        headers: dict[str, str] = {}
        try:
            stream = await self._client.chat.completions.create(**kwargs)
            headers = rate_limit_headers(stream.response.headers)
            try:
                async for chunk in stream:
                    text = assembler.feed(chunk)
                    if text:
                        await on_text(text)
                    _raise_for_stream_error(chunk)
            finally:
                await stream.close()
        except ProviderError as exc:
            exc.partial_text = "".join(assembler.text)
            raise
        except Exception as exc:
            raise self._classify(exc, "".join(assembler.text)) from exc
        if assembler.finish_reason is None:
            raise ProviderError(
                "stream_cut",
                f"{self.provider} stream ended before the model finished",
                partial_text="".join(assembler.text),
            )
        return dataclasses.replace(assembler.turn(), headers=headers)

    def _classify(self, exc: Exception, partial_text: str) -> ProviderError:
        local = _local_fault(exc)
        if local is not None:  # nothing the provider did: retrying cannot help
            return ProviderError(
                "bad_request",
                f"the request to {self.provider} could not be built: {local}",
                partial_text=partial_text,
            )
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            return self._from_status(exc, partial_text)
        if isinstance(exc, sdk.APITimeoutError):
            return ProviderError(
                "timeout", f"{self.provider} did not answer in time", partial_text=partial_text
            )
        if isinstance(exc, sdk.APIConnectionError):
            kind: ErrorKind = "stream_cut" if partial_text else "connection"
            return ProviderError(
                kind, f"could not reach {self.provider}: {exc}", partial_text=partial_text
            )
        # Anything raised while iterating (a reset connection, a truncated chunk) is a cut stream.
        return ProviderError(
            "stream_cut",
            f"{self.provider} stream failed: {type(exc).__name__}: {exc}",
            partial_text=partial_text,
        )

    def _from_status(self, exc: Any, partial_text: str) -> ProviderError:
        status: int = exc.status_code
        code, detail, failed_generation = _error_details(exc)
        kind: ErrorKind
        if status == 429:
            kind = "rate_limit"
        elif status in (401, 403):
            kind = "auth"
            detail = f"{detail} (check {self._key_env})"
        elif status == 404:
            kind = "not_found"
            detail = f"{detail} (is '{self.model}' a {self.provider} model?)"
        elif code == "context_length_exceeded" or "context length" in detail.lower():
            kind = "context_length"
        elif code == "tool_use_failed":
            kind = "tool_use_failed"
        elif status >= 500:
            kind = "server"
        else:
            kind = "bad_request"
        return ProviderError(
            kind,
            f"{self.provider} answered HTTP {status}: {detail}",
            status=status,
            retry_after=_retry_after(exc.response.headers),
            partial_text=partial_text,
            headers=rate_limit_headers(exc.response.headers),
            failed_generation=failed_generation,
        )


def _local_fault(exc: BaseException) -> str | None:
    """A failure of our own making (text no encoder takes) anywhere in ``exc``'s causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, UnicodeError):
            return f"{type(current).__name__}: {current}"
        current = current.__cause__ or current.__context__
    return None


def _raise_for_stream_error(chunk: Any) -> None:
    """Groq reports a failure that happens mid-stream in ``x_groq.error``."""
    x_groq = getattr(chunk, "x_groq", None)
    error = getattr(x_groq, "error", None) if x_groq is not None else None
    if error:
        raise ProviderError("server", f"groq stopped the stream: {error}")


def _error_details(exc: Any) -> tuple[str, str, str | None]:
    """Code, message and Groq's ``failed_generation``; OpenAI's ``body`` is the inner error,
    Groq's the whole error document."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            failed = inner.get("failed_generation")
            return (
                str(inner.get("code") or ""),
                str(inner["message"]),
                str(failed) if failed is not None else None,
            )
    code = str(getattr(exc, "code", "") or "")
    return code, str(getattr(exc, "message", "") or exc), None


def rate_limit_headers(headers: Any) -> dict[str, str]:
    """The ``x-ratelimit-*`` and ``retry-after*`` headers, lower-cased."""
    return {
        str(name).lower(): str(value)
        for name, value in headers.items()
        if str(name).lower().startswith(("x-ratelimit-", "retry-after"))
    }


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        return max(0.0, email.utils.mktime_tz(parsed) - time.time()) if parsed else None
