"""Model providers behind one protocol (:class:`agentloop.llm.base.ChatModel`)."""

from agentloop.llm.base import ChatModel, ModelCall, ModelTurn, ProviderError
from agentloop.llm.registry import get_model, parse_model_spec

__all__ = ["ChatModel", "ModelCall", "ModelTurn", "ProviderError", "get_model", "parse_model_spec"]
