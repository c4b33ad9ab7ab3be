"""The ``search_web`` tool and its providers (Tavily, Brave Search, SearXNG, DuckDuckGo).

``search_web_tool()`` is what a registry adds; ``SearchSettings.from_env()`` says which
provider it uses (see docs/tools.md, "search_web").
"""

from agentloop.tools.search.base import SearchProvider, SearchResult
from agentloop.tools.search.settings import PROVIDER_NAMES, ProviderName, SearchSettings
from agentloop.tools.search.tool import SearchWebArgs, build_provider, search_web_tool

__all__ = [
    "PROVIDER_NAMES",
    "ProviderName",
    "SearchProvider",
    "SearchResult",
    "SearchSettings",
    "SearchWebArgs",
    "build_provider",
    "search_web_tool",
]
