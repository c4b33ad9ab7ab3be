"""The chat function's app as deployed, plus the benchmark's tools.

Used where the app itself must run a tool task over HTTP (the chat app's memory row):
``uvicorn --app-dir functions/chat bench.chat_app_with_tools:app``. Everything else about the
app (its default tools, auth from the environment, logging) is what ``chat_app:app`` does.
"""

from __future__ import annotations

from agentloop.app_settings import AppSettings, configure_logging
from agentloop.server.service import service_from_env
from bench.agentloop_tools import TOOLS
from chat_app import create_app

settings = AppSettings.from_env()
configure_logging(settings)
service = service_from_env(settings)
for item in TOOLS:
    service.tools.add(item)
app = create_app(service)
