"""JwksUnavailable: the deployment, not the token, is why a verification failed (a 503).

Kept apart from the rest of the package because ``JwksUnavailable`` subclasses
``ConfigurationError``, whose module imports pydantic: this module is imported when the first
such error is raised, so importing ``agentloop.oidc`` stays standard-library only.
"""

from __future__ import annotations

from agentloop.config import ConfigurationError


class JwksUnavailable(ConfigurationError):
    """No key set was ever loaded from the issuer: no token can be checked, so none passes."""
