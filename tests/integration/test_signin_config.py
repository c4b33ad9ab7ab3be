"""``GET /auth/config``: the chat page's sign-in client, public, from ``AGENTLOOP_JWT_*``.

The app is served through Starlette's TestClient with the route table of ``chat_app``; in jwt
mode the service's auth mode says so, the variables say which issuer and client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from chat_app import create_app
from tests.served import LOCAL, make_service

ISSUER = "https://issuer.example.com/"


@pytest.fixture(autouse=True)
def no_jwt_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ISSUER", "AUDIENCE", "CLIENT_ID", "SCOPES", "JWKS_URL", "TIER_CLAIM"):
        monkeypatch.delenv(f"AGENTLOOP_JWT_{name}", raising=False)


def client_in(mode: str) -> TestClient:
    service = dataclasses.replace(make_service(), auth_mode=mode)  # type: ignore[arg-type]
    return TestClient(create_app(service), base_url=LOCAL)


@pytest.fixture
def jwt_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("AGENTLOOP_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("AGENTLOOP_JWT_AUDIENCE", "page-client")
    with client_in("jwt") as client:
        yield client


@pytest.mark.parametrize("mode", ["bearer", "none", "iam"])
def test_without_jwt_there_is_nothing_to_sign_in_to(mode: str) -> None:
    with client_in(mode) as client:
        response = client.get("/auth/config")
    assert response.status_code == 200
    assert response.json() == {}


def test_jwt_mode_names_the_issuer_and_the_page_s_client_without_a_token(
    jwt_client: TestClient,
) -> None:
    response = jwt_client.get("/auth/config")  # no Authorization header: the route is public
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-cache"
    # One audience and no client id set: the audience is the client (Cognito, Google).
    assert response.json() == {
        "issuer": ISSUER,
        "client_id": "page-client",
        "scopes": "openid email profile",
    }


def test_an_api_audience_is_asked_for_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Auth0: the access token is a JWT only when the authorization request names the API."""
    monkeypatch.setenv("AGENTLOOP_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("AGENTLOOP_JWT_AUDIENCE", "https://chat.example.com/api")
    monkeypatch.setenv("AGENTLOOP_JWT_CLIENT_ID", "spaClient")
    monkeypatch.setenv("AGENTLOOP_JWT_SCOPES", "  openid   profile offline_access ")
    with client_in("jwt") as client:
        body = client.get("/auth/config").json()
    assert body == {
        "issuer": ISSUER,
        "client_id": "spaClient",
        "scopes": "openid profile offline_access",
        "audience": "https://chat.example.com/api",
    }


def test_the_variables_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOOP_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("AGENTLOOP_JWT_AUDIENCE", "first")
    with client_in("jwt") as client:
        assert client.get("/auth/config").json()["client_id"] == "first"
        monkeypatch.setenv("AGENTLOOP_JWT_AUDIENCE", "second")
        assert client.get("/auth/config").json()["client_id"] == "first"


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"AGENTLOOP_JWT_AUDIENCE": "a,b"}, "AGENTLOOP_JWT_CLIENT_ID is not set"),
        ({"AGENTLOOP_JWT_CLIENT_ID": "has space"}, "AGENTLOOP_JWT_CLIENT_ID must be"),
        ({"AGENTLOOP_JWT_CLIENT_ID": "x" * 257}, "AGENTLOOP_JWT_CLIENT_ID must be"),
        ({"AGENTLOOP_JWT_SCOPES": "email profile"}, "AGENTLOOP_JWT_SCOPES must be"),
        ({"AGENTLOOP_JWT_SCOPES": 'openid "x"'}, "AGENTLOOP_JWT_SCOPES must be"),
        ({"AGENTLOOP_JWT_SCOPES": "openid\\x"}, "AGENTLOOP_JWT_SCOPES must be"),
        ({"AGENTLOOP_JWT_SCOPES": "openid é"}, "AGENTLOOP_JWT_SCOPES must be"),
        ({"AGENTLOOP_JWT_ISSUER": "http://issuer.example.com"}, "AGENTLOOP_JWT_ISSUER"),
    ],
)
def test_a_wrong_setting_is_a_503_naming_it(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], named: str
) -> None:
    monkeypatch.setenv("AGENTLOOP_JWT_ISSUER", ISSUER)
    monkeypatch.setenv("AGENTLOOP_JWT_AUDIENCE", "page-client")
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with client_in("jwt") as client:
        response = client.get("/auth/config")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["type"] == "configuration_error"
    assert named in error["message"]


def test_only_get_is_answered_and_input_is_ignored(jwt_client: TestClient) -> None:
    expected = jwt_client.get("/auth/config").json()
    assert jwt_client.post("/auth/config", json={"issuer": "https://evil"}).status_code == 405
    hostile = jwt_client.get(
        "/auth/config?issuer=https://evil.example&client_id=x",
        headers={"authorization": "Bearer not-a-jwt", "x-forwarded-host": "evil.example"},
    )
    assert hostile.status_code == 200
    assert hostile.json() == expected
