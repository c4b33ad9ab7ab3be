"""Reading the web for tools: SSRF-safe fetching (``safe_fetch``, deliberately small and
standalone so it can be audited on its own), main-text extraction (``extract``) and what makes
a URL usable (``urls``). Nothing is imported here: ``safe_fetch`` brings httpx, which a run
that reads no page never needs.
"""
