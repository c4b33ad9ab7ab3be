"""Running model-written Python: one runner, a local and a Lambda backend."""

from agentloop.sandbox.models import RunOutcome, SandboxLimits
from agentloop.sandbox.runner import SandboxError, run_python, run_python_async

__all__ = ["RunOutcome", "SandboxError", "SandboxLimits", "run_python", "run_python_async"]
