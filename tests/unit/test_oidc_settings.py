"""JwtSettings.from_env: what it reads, and errors that name the variable to fix."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentloop.config import ConfigurationError
from agentloop.oidc import JwtSettings

GOOD = {
    "AGENTLOOP_JWT_ISSUER": "https://issuer.example/tenant/",
    "AGENTLOOP_JWT_AUDIENCE": " client-a, client-b ,",
}


def test_reads_the_variables() -> None:
    settings = JwtSettings.from_env(
        {
            **GOOD,
            "AGENTLOOP_JWT_JWKS_URL": "https://keys.example/jwks",
            "AGENTLOOP_JWT_TIER_CLAIM": "cognito:groups",
        }
    )
    assert settings.issuer == "https://issuer.example/tenant/"  # kept exactly: iss must equal it
    assert settings.audience == ("client-a", "client-b")
    assert settings.jwks_url == "https://keys.example/jwks"
    assert settings.tier_claim == "cognito:groups"
    assert settings.algorithms == ("RS256", "ES256")
    assert settings.leeway_s == 30
    assert (
        settings.discovery_url == "https://issuer.example/tenant/.well-known/openid-configuration"
    )


def test_optional_ones_default_to_none() -> None:
    settings = JwtSettings.from_env({**GOOD, "AGENTLOOP_JWT_JWKS_URL": "  "})
    assert (settings.jwks_url, settings.tier_claim) == (None, None)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://localhost/x", "http://[::1]:9"])
def test_loopback_http_is_allowed(url: str) -> None:
    assert JwtSettings.from_env({**GOOD, "AGENTLOOP_JWT_ISSUER": url}).issuer == url


@pytest.mark.parametrize(
    ("changes", "variable"),
    [
        ({"AGENTLOOP_JWT_ISSUER": ""}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_ISSUER": "http://issuer.example"}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_ISSUER": "http://10.0.0.1"}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_ISSUER": "issuer.example"}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_ISSUER": "https://"}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_ISSUER": "https://u:p@issuer.example"}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_ISSUER": "https://issuer.example:99999"}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_ISSUER": "https://" + "a" * 3000}, "AGENTLOOP_JWT_ISSUER"),
        ({"AGENTLOOP_JWT_AUDIENCE": ""}, "AGENTLOOP_JWT_AUDIENCE"),
        ({"AGENTLOOP_JWT_AUDIENCE": " , ,"}, "AGENTLOOP_JWT_AUDIENCE"),
        ({"AGENTLOOP_JWT_JWKS_URL": "http://keys.example/jwks"}, "AGENTLOOP_JWT_JWKS_URL"),
        ({"AGENTLOOP_JWT_JWKS_URL": "ftp://keys.example/jwks"}, "AGENTLOOP_JWT_JWKS_URL"),
    ],
)
def test_errors_name_the_variable(changes: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigurationError, match=variable):
        JwtSettings.from_env({**GOOD, **changes})


def test_missing_variables_are_named() -> None:
    with pytest.raises(ConfigurationError, match="AGENTLOOP_JWT_ISSUER"):
        JwtSettings.from_env({})
    with pytest.raises(ConfigurationError, match="AGENTLOOP_JWT_AUDIENCE"):
        JwtSettings.from_env({"AGENTLOOP_JWT_ISSUER": "https://issuer.example"})


@pytest.mark.parametrize(
    "changes",
    [{"algorithms": ("HS256",)}, {"algorithms": ()}, {"leeway_s": -1}, {"jwks_timeout_s": 0}],
)
def test_direct_construction_is_checked(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        JwtSettings(issuer="https://issuer.example", audience=("a",), **changes)  # type: ignore[arg-type]


def test_import_uses_only_the_standard_library() -> None:
    """Importing agentloop.oidc loads neither PyJWT, cryptography, httpx nor pydantic."""
    probe = (
        "import sys, agentloop.oidc; "
        "print(sorted(m for m in ('jwt', 'cryptography', 'httpx', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
