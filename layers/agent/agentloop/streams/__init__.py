"""Resumable streams: a run's frames kept in the store while they are sent, so a client that
lost its connection can come back to the answer (opt-in: ``ChatRequest.resumable``).

``keys.py`` has the layout (one partition per owner and thread, a head and the frames in
items), ``log.py`` the store calls, ``writer.py`` the logging of a run's frames as
``server.faces.serve`` sends them, ``reader.py`` the replay that goes on live, and
``routes.py`` the HTTP side (``GET /chat/stream``; the AI SDK's ``GET /api/chat/{id}/stream``
is in ``faces.ui_stream.resume``).
"""

from __future__ import annotations

from agentloop.streams.log import DAY_S, ENDED, LIVE, Head, StreamLog
from agentloop.streams.reader import Replay, replay
from agentloop.streams.writer import StreamWriter

__all__ = ["DAY_S", "ENDED", "LIVE", "Head", "Replay", "StreamLog", "StreamWriter", "replay"]
