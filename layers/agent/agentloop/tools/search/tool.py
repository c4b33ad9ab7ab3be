"""The ``search_web`` tool: one query to the configured provider, normalised results back.

Without explicit settings the environment is read on every call (it is a handful of
lookups): the chat app copies keys from the project secret into the environment at
start-up, possibly after the tool registry was built, and the tool must see them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agentloop.config import ConfigurationError
from agentloop.tools.base import Tool, ToolContext, ToolError, tool
from agentloop.tools.search.base import SearchProvider, finalise
from agentloop.tools.search.settings import ENV_VARS, SearchSettings

if TYPE_CHECKING:
    from agentloop.tools.search.transport import Transport

logger = logging.getLogger("agentloop.tools.search")

DEFAULT_COUNT = 5
MAX_COUNT = 10

DESCRIPTION = (
    "Search the web. Returns up to `count` results for the query, each with title, url and "
    "snippet. Use it for current or specific facts and to find sources; snippets are short "
    "extracts, so cite the url of each result you rely on."
)

_MISCONFIGURED_HINT = "answer without web search and tell the user that search is misconfigured"


class SearchWebArgs(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)

    query: str = Field(
        min_length=1,
        max_length=400,
        description="What to search for, as you would type it into a search engine.",
    )
    count: int = Field(
        default=DEFAULT_COUNT,
        ge=1,
        le=MAX_COUNT,
        description=f"How many results to return (1-{MAX_COUNT}).",
    )


def build_provider(settings: SearchSettings, transport: Transport) -> SearchProvider:
    """The provider the settings choose; a ToolError naming the variable if it lacks config.

    The providers (and httpx, which they use) are imported here, at the first search."""
    from agentloop.tools.search.brave import BraveSearch
    from agentloop.tools.search.duckduckgo import DuckDuckGoSearch
    from agentloop.tools.search.searxng import SearxngSearch
    from agentloop.tools.search.tavily import TavilySearch

    choice = settings.chosen_provider()
    if choice == "tavily":
        if settings.tavily_api_key is None:
            raise _missing(choice, ENV_VARS["tavily_api_key"])
        return TavilySearch(
            api_key=settings.tavily_api_key.get_secret_value(),
            base_url=settings.tavily_url,
            transport=transport,
        )
    if choice == "brave":
        if settings.brave_api_key is None:
            raise _missing(choice, ENV_VARS["brave_api_key"])
        return BraveSearch(
            api_key=settings.brave_api_key.get_secret_value(),
            base_url=settings.brave_url,
            transport=transport,
        )
    if choice == "searxng":
        if settings.searxng_url is None:
            raise _missing(choice, ENV_VARS["searxng_url"])
        return SearxngSearch(base_url=settings.searxng_url, transport=transport)
    return DuckDuckGoSearch(
        base_url=settings.duckduckgo_url, user_agent=settings.user_agent, transport=transport
    )


def _missing(provider: str, variable: str) -> ToolError:
    return ToolError(
        f"{ENV_VARS['provider']} is {provider!r} but {variable} is not set: set it, or choose "
        "another provider",
        hint=_MISCONFIGURED_HINT,
    )


def search_web_tool(settings: SearchSettings | None = None) -> Tool:
    """The ``search_web`` tool; ``settings`` None reads them from the environment per call."""

    @tool(name="search_web", description=DESCRIPTION)
    async def search_web(args: SearchWebArgs, ctx: ToolContext) -> dict[str, Any]:
        """Search with the configured provider; normalise, de-duplicate and cap the results."""
        current = settings
        if current is None:
            try:
                current = SearchSettings.from_env()
            except ConfigurationError as exc:
                raise ToolError(str(exc), hint=_MISCONFIGURED_HINT) from None
        limit_s = ctx.deadline.cap(current.timeout_s)
        if limit_s <= 0:
            raise ToolError(
                "no time is left in this request for a web search",
                hint="answer from what you have",
            )
        from agentloop.tools.search.transport import Transport, shared_client

        transport = Transport(shared_client(), limit_s, current.secrets())
        provider = build_provider(current, transport)
        count = min(args.count, current.max_results)
        found = await provider.search(args.query, count)
        results = finalise(found, count, current.snippet_max_chars)
        logger.info(
            "search: %s returned %d results (%d kept)", provider.name, len(found), len(results)
        )
        return {
            "query": args.query,
            "provider": provider.name,
            "results": [r.as_dict() for r in results],
        }

    return search_web
