"""agentloop: a streaming, tool-using chat agent for AWS Lambda.

The public entry point is :func:`agentloop.chat.handle_chat`; everything else is
the machinery behind it. Submodules are imported on demand so that a cold start
pays only for what a request uses.
"""

__version__ = "0.1.0"
