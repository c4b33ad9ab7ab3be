"""Reading the web for tools: SSRF-safe fetching and main-text extraction.

``safe_fetch`` is deliberately small and standalone so it can be audited on its own;
``extract`` turns a fetched HTML page into the article's text as markdown.
"""

from agentloop.net.safe_fetch import (
    FetchError,
    FetchPolicy,
    FetchRefused,
    FetchResult,
    Resolver,
    SafeFetcher,
    check_address,
    safe_fetch,
    system_resolve,
)

__all__ = [
    "FetchError",
    "FetchPolicy",
    "FetchRefused",
    "FetchResult",
    "Resolver",
    "SafeFetcher",
    "check_address",
    "safe_fetch",
    "system_resolve",
]
