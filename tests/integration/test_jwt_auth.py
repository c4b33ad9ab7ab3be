"""``AGENTLOOP_AUTH_MODE=jwt`` end to end: the chat app on loopback, the issuer on loopback.

The issuer (``tests.jwks_server``) publishes keys made in this test; the app checks tokens
with the service's real authenticator (``service.authenticator`` of ``AppSettings`` read from
the environment it would be deployed with). Every face accepts a valid RS256 and ES256 token
and refuses each kind of bad one with a 401 naming the scheme, before any model call (the
scripted model's request log stays empty). An issuer that is down, slow or answers garbage
is a 503, never a pass. Who called reaches the run: the principal in its extras, its id as
the sandbox tenant (the loopback Lambda fake sees the TenantId), on its log lines, never the
token.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import sandbox_handler
from agentloop.app_settings import AppSettings, configure_logging
from agentloop.config import ConfigurationError
from agentloop.events import Done
from agentloop.http_api import InvocationInfo
from agentloop.logs import PRINCIPAL_ID
from agentloop.oidc import JwtSettings, JwtVerifier
from agentloop.principal import Principal
from agentloop.sandbox.backends import lambda_tenant_id
from agentloop.sandbox.settings import SandboxSettings
from agentloop.server.identity import jwt_bearer
from agentloop.server.service import ChatService, authenticator
from agentloop.tools.base import Tool
from agentloop.tools.execute_code import execute_code_tool
from tests.fakes.lambda_api import SANDBOX_FUNCTION, FakeLambda
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import parse_sse, tool_payload
from tests.jwks_server import (
    JWKS_PATH,
    IssuerServer,
    SigningKey,
    VerifierClock,
    b64url,
    closed_port_url,
    forge,
    mint,
)
from tests.mcp_session import open_mcp_session
from tests.sample_tools import whoami_tool
from tests.served import ServedApp, make_service

AUDIENCE = "chat-page-client"
MODEL = "groq:m"
USER = {"role": "user", "content": "What is the capital of France?"}
ANSWER = "Paris."
REALM = 'Bearer realm="agentloop"'
INVALID = 'Bearer realm="agentloop", error="invalid_token"'


def jwt_env(issuer: IssuerServer) -> dict[str, str]:
    """What a deployment sets for jwt mode (the JWKS URL from the issuer's discovery)."""
    return {
        "AGENTLOOP_AUTH_MODE": "jwt",
        "AGENTLOOP_JWT_ISSUER": issuer.url,
        "AGENTLOOP_JWT_AUDIENCE": f"another-client, {AUDIENCE}",
        "AGENTLOOP_JWT_TIER_CLAIM": "cognito:groups",
    }


def jwt_service(issuer: IssuerServer, tools: list[Tool] | None = None) -> ChatService:
    """The test service, checking callers as ``service_from_env`` does in jwt mode."""
    service = make_service(tools)
    service.authenticate = authenticator(AppSettings.from_env(jwt_env(issuer)))
    service.auth_mode = "jwt"
    return service


def claims(issuer: IssuerServer, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    values = {
        "iss": issuer.url,
        "aud": AUDIENCE,
        "sub": "user-1",
        "iat": now,
        "exp": now + 600,
        "email": "alice@example.com",
        "cognito:groups": ["pro", "staff"],
    }
    values.update(changes)
    return {name: value for name, value in values.items() if value is not None}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def answer_everything(llm: ScriptedLLM) -> None:
    llm.respond_with(lambda request: Reply(text=ANSWER))


# ---- every face: one request each, driven by plain HTTP ----------------------------------------

FACE_BODIES: dict[str, dict[str, Any]] = {
    "/chat": {"messages": [USER], "model": MODEL},
    "/api/chat": {
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        "model": MODEL,
    },
    "/ag-ui": {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    },
    "/v1/chat/completions": {"model": MODEL, "stream": False, "messages": [USER]},
    "/v1/responses": {"model": MODEL, "stream": False, "input": "hi"},
    "/mcp": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
}
FACES = sorted(FACE_BODIES)
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def post(app: ServedApp, face: str, headers: dict[str, str]) -> httpx.Response:
    extra = MCP_HEADERS if face == "/mcp" else {}
    return httpx.post(
        f"{app.url}{face}", json=FACE_BODIES[face], headers={**headers, **extra}, timeout=30
    )


def chat_sse(app: ServedApp, token: str) -> Done:
    """``POST /chat`` read as Server-Sent Events to its ``done``."""
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", f"{app.url}/chat", json=FACE_BODIES["/chat"], headers=bearer(token)
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        frames = parse_sse(response.iter_lines())
    kind, done = frames[-1]
    assert kind == "done"
    assert done is not None
    return Done.model_validate(done)


async def ask_over_mcp(app: ServedApp, token: str) -> str:
    """The MCP SDK's client calls ``ask``; the answer's text."""
    async with open_mcp_session(app.url, token=token) as session:
        result = await session.call_tool("ask", {"question": "capital of France?", "tools": []})
    assert not result.is_error, result
    return " ".join(getattr(part, "text", "") for part in result.content)


async def ask_face(app: ServedApp, face: str, token: str) -> str:
    """One accepted request on ``face``; what it answered, as text."""
    if face == "/chat":
        return chat_sse(app, token).text
    if face == "/mcp":
        return await ask_over_mcp(app, token)
    response = post(app, face, bearer(token))
    assert response.status_code == 200, response.text
    return response.text


class PrincipalsSeen:
    """The principal id each finished run was logged under (``on_finish`` runs in the run's
    context, where the app set :data:`PRINCIPAL_ID`)."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []

    def record(self, done: Done, info: InvocationInfo) -> None:
        self.ids.append(PRINCIPAL_ID.get())


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
@pytest.mark.parametrize("face", FACES)
async def test_a_valid_token_is_accepted_on_every_face(
    llm: ScriptedLLM,
    issuer: IssuerServer,
    rsa: SigningKey,
    ecdsa: SigningKey,
    face: str,
    alg: str,
) -> None:
    answer_everything(llm)
    token = mint(claims(issuer), rsa if alg == "RS256" else ecdsa)
    seen = PrincipalsSeen()
    service = jwt_service(issuer)
    service.on_finish.append(seen.record)

    with ServedApp(service, name=f"jwt{face}", lifespan="on") as app:
        text = await ask_face(app, face, token)
        app.runs(1)

    assert ANSWER in text
    assert len(llm.requests) == 1
    expected = Principal.for_jwt(issuer.url, "user-1", "alice@example.com", "pro")
    assert seen.ids == [expected.id]


# ---- refusals: 401 with the scheme named, and no model call ------------------------------------


def tampered(token: str, issuer: IssuerServer) -> str:
    """The token with another subject in its payload, the signature kept."""
    header, _, signature = token.split(".")
    payload = b64url(json.dumps(claims(issuer, sub="admin")).encode())
    return f"{header}.{payload}.{signature}"


def bad_tokens(
    issuer: IssuerServer, rsa: SigningKey, stranger: SigningKey, elsewhere: str
) -> dict[str, str]:
    now = int(time.time())
    unsigned = {"alg": "none", "kid": rsa.kid, "typ": "JWT"}
    hs256 = {"alg": "HS256", "kid": rsa.kid, "typ": "JWT"}
    return {
        "expired": mint(claims(issuer, iat=now - 7200, exp=now - 3600), rsa),
        "not yet valid": mint(claims(issuer, nbf=now + 3600), rsa),
        "wrong issuer": mint(claims(issuer, iss="https://issuer.example"), rsa),
        "wrong audience": mint(claims(issuer, aud="someone-else"), rsa),
        "alg none": forge(unsigned, claims(issuer)),
        "HS256 keyed with the public key": forge(hs256, claims(issuer), hmac_key=rsa.public_pem()),
        "unknown kid": mint(claims(issuer), stranger),
        "tampered payload": tampered(mint(claims(issuer), rsa), issuer),
        "jku elsewhere": mint(claims(issuer), stranger, headers={"jku": elsewhere + JWKS_PATH}),
        "x5u elsewhere": mint(claims(issuer), stranger, headers={"x5u": elsewhere + "/cert.pem"}),
        "kid of a published key, signed by another": mint(
            claims(issuer), stranger, headers={"kid": rsa.kid}
        ),
    }


BAD_TOKEN_KINDS = [
    "expired",
    "not yet valid",
    "wrong issuer",
    "wrong audience",
    "alg none",
    "HS256 keyed with the public key",
    "unknown kid",
    "tampered payload",
    "jku elsewhere",
    "x5u elsewhere",
    "kid of a published key, signed by another",
]


@pytest.fixture
def elsewhere(stranger: SigningKey) -> Iterator[IssuerServer]:
    """Another loopback issuer, publishing the stranger's key: a token may point here."""
    with IssuerServer([stranger]) as server:
        yield server


@pytest.mark.parametrize("face", FACES)
def test_every_bad_token_is_a_401_before_any_model_call(
    llm: ScriptedLLM,
    issuer: IssuerServer,
    elsewhere: IssuerServer,
    rsa: SigningKey,
    stranger: SigningKey,
    face: str,
) -> None:
    answer_everything(llm)
    tokens = bad_tokens(issuer, rsa, stranger, elsewhere.url)
    assert sorted(tokens) == sorted(BAD_TOKEN_KINDS)

    with ServedApp(jwt_service(issuer), name=f"jwt-bad{face}", lifespan="on") as app:
        responses = {kind: post(app, face, bearer(token)) for kind, token in tokens.items()}
        finished = app.finished

    for kind, response in responses.items():
        assert response.status_code == 401, (kind, response.text)
        assert response.headers["www-authenticate"] == INVALID, kind
        assert tokens[kind] not in response.text
    assert llm.requests == []
    assert finished == []
    assert elsewhere.requests == []  # no URL is ever taken from a token
    assert issuer.count(JWKS_PATH) == 1  # fetched once; the unknown kids within a minute: not


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("authorization", [None, "", "Basic dXNlcjpwYXNz", "Bearer"], ids=repr)
def test_no_token_is_a_401_naming_the_scheme_without_an_error(
    llm: ScriptedLLM, issuer: IssuerServer, face: str, authorization: str | None
) -> None:
    """RFC 6750 3.1: a request without a token gets the challenge, no error attribute."""
    headers = {} if authorization is None else {"authorization": authorization}
    with ServedApp(jwt_service(issuer), name=f"jwt-none{face}", lifespan="on") as app:
        response = post(app, face, headers)

    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == REALM
    assert llm.requests == []
    assert issuer.requests == []  # nothing to check: the issuer is not asked


def test_an_unknown_kid_is_refused_after_one_refetch_a_minute(
    llm: ScriptedLLM,
    issuer: IssuerServer,
    rsa: SigningKey,
    stranger: SigningKey,
    clock: VerifierClock,
) -> None:
    """A rotation: the issuer starts publishing a new key; a token signed with it is accepted
    once the verifier refetched, and a flood of unknown kids costs one fetch a minute."""
    answer_everything(llm)
    settings = JwtSettings(issuer=issuer.url, audience=(AUDIENCE,))
    service = make_service()
    service.authenticate = jwt_bearer(JwtVerifier(settings, clock=clock))
    unknown = mint(claims(issuer), stranger)

    with ServedApp(service, name="jwt-rotation") as app:
        chat_sse(app, mint(claims(issuer), rsa))  # loads the key set
        assert issuer.count(JWKS_PATH) == 1
        clock.now += 61
        first = post(app, "/chat", bearer(unknown))
        second = post(app, "/chat", bearer(unknown))
        fetches_after_unknown = issuer.count(JWKS_PATH)
        issuer.keys.append(stranger)  # now published: a new signing key
        refused_until_due = post(app, "/chat", bearer(unknown))
        clock.now += 61
        chat_sse(app, unknown)

    assert [first.status_code, second.status_code, refused_until_due.status_code] == [401] * 3
    assert fetches_after_unknown == 2  # one refetch for the unknown kid, not one per request
    assert issuer.count(JWKS_PATH) == 3
    assert len(llm.requests) == 2


# ---- the issuer unavailable: 503, never a pass --------------------------------------------------


@pytest.mark.parametrize("mode", ["error", "garbage", "oversized", "nested", "slow", "down"])
def test_an_unavailable_issuer_is_a_503_never_a_pass(
    llm: ScriptedLLM, issuer: IssuerServer, rsa: SigningKey, mode: str
) -> None:
    answer_everything(llm)
    jwks_url = closed_port_url() + JWKS_PATH if mode == "down" else None
    if mode != "down":
        issuer.mode = mode  # type: ignore[assignment]
    settings = JwtSettings(
        issuer=issuer.url, audience=(AUDIENCE,), jwks_url=jwks_url, jwks_timeout_s=0.5
    )
    service = make_service()
    service.authenticate = jwt_bearer(JwtVerifier(settings))
    token = mint(claims(issuer), rsa)

    with ServedApp(service, name=f"jwt-{mode}") as app:
        started = time.monotonic()
        responses = [post(app, face, bearer(token)) for face in ("/chat", "/v1/chat/completions")]
        seconds = time.monotonic() - started

    for response in responses:
        assert response.status_code == 503, response.text
        assert "authentication is unavailable" in response.text
        assert token not in response.text
    assert llm.requests == []
    assert seconds < 5  # bounded: a slow issuer does not hold requests


# ---- start-up ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("missing", "named"),
    [("AGENTLOOP_JWT_ISSUER", "AGENTLOOP_JWT_ISSUER"), ("AGENTLOOP_JWT_AUDIENCE", "AUDIENCE")],
)
def test_jwt_mode_without_issuer_or_audience_stops_start_up(
    issuer: IssuerServer, missing: str, named: str
) -> None:
    environ = {k: v for k, v in jwt_env(issuer).items() if k != missing}
    with pytest.raises(ConfigurationError, match=named):
        AppSettings.from_env(environ)


def test_the_app_built_from_the_environment_accepts_the_issuer_s_tokens(
    llm: ScriptedLLM,
    issuer: IssuerServer,
    ecdsa: SigningKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``service_from_env`` at start-up (the lifespan), as deployed: jwt mode's authenticator."""
    from chat_app import create_app
    from tests.fakes.loopback import LoopbackServer

    answer_everything(llm)
    for name in ("AGENTLOOP_SECRET_ID", "AGENTLOOP_MCP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    settings = AppSettings.from_env(jwt_env(issuer))
    app = create_app(settings=settings)
    with LoopbackServer(app, name="jwt-from-env", lifespan="on") as server:
        token = mint(claims(issuer), ecdsa)
        accepted = httpx.post(
            f"{server.url}/v1/chat/completions",
            json=FACE_BODIES["/v1/chat/completions"],
            headers=bearer(token),
            timeout=30,
        )
        refused = httpx.post(
            f"{server.url}/v1/chat/completions",
            json=FACE_BODIES["/v1/chat/completions"],
            headers=bearer(token[:-4] + "AAAA"),
            timeout=30,
        )

    assert accepted.status_code == 200, accepted.text
    assert refused.status_code == 401
    assert len(llm.requests) == 1


# ---- the principal on the run -----------------------------------------------------------------


def call_whoami(request: RecordedRequest) -> Reply:
    if request.messages[-1]["role"] != "tool":
        return Reply(tool_calls=[call("whoami")])
    return Reply(text=ANSWER)


def test_the_principal_is_on_the_run_s_context(
    llm: ScriptedLLM, issuer: IssuerServer, rsa: SigningKey
) -> None:
    llm.respond_with(call_whoami)
    seen: list[Any] = []
    token = mint(claims(issuer, sub="user-42", email=None, username="bob"), rsa)

    with ServedApp(jwt_service(issuer, [whoami_tool(seen)]), name="jwt-context") as app:
        chat_sse(app, token)

    [(principal, tenant)] = seen
    assert principal == Principal.for_jwt(issuer.url, "user-42", "bob", "pro")
    assert principal.kind == "jwt"
    assert principal.tier == "pro"
    assert tenant == principal.id


pytestmark_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")


def run_code_then_answer(request: RecordedRequest) -> Reply:
    if request.messages[-1]["role"] != "tool":
        return Reply(tool_calls=[call("execute_code", code="print(6 * 7)", timeout_s=5)])
    payload = tool_payload(request.messages[-1]["content"])
    return Reply(text=f"It printed {payload['result']['stdout'].strip()}.")


@pytestmark_linux
def test_two_principals_have_two_sandbox_tenants(
    llm: ScriptedLLM, issuer: IssuerServer, rsa: SigningKey, lambda_api: FakeLambda
) -> None:
    llm.respond_with(run_code_then_answer)
    lambda_api.register(SANDBOX_FUNCTION, sandbox_handler.handler, timeout_s=60, per_tenant=True)
    sandbox = SandboxSettings.model_validate(
        {
            "backend": "lambda",
            "function": SANDBOX_FUNCTION,
            "endpoint_url": lambda_api.url,
            "region": "us-east-1",
            "tenancy": "per_tenant",
        }
    )
    service = jwt_service(issuer, [execute_code_tool(sandbox)])
    alice = mint(claims(issuer, sub="alice"), rsa)
    bob = mint(claims(issuer, sub="bob"), rsa)

    with ServedApp(service, name="jwt-tenants") as app:
        body = {**FACE_BODIES["/chat"], "tools": ["execute_code"]}
        for token in (alice, bob, alice):
            response = httpx.post(f"{app.url}/chat", json=body, headers=bearer(token), timeout=30)
            assert "It printed 42." in response.text

    tenants = [invocation.tenant for invocation in lambda_api.invocations]
    ids = [Principal.for_jwt(issuer.url, sub, sub, None).id for sub in ("alice", "bob")]
    assert tenants == [lambda_tenant_id(ids[0]), lambda_tenant_id(ids[1]), lambda_tenant_id(ids[0])]
    assert tenants[0] != tenants[1]


# ---- logs: the principal id, never the token ---------------------------------------------------


def test_log_lines_carry_the_principal_id_and_never_the_token(
    llm: ScriptedLLM,
    issuer: IssuerServer,
    rsa: SigningKey,
    stranger: SigningKey,
    caplog: pytest.LogCaptureFixture,
    restore_logging: None,
) -> None:
    answer_everything(llm)
    configure_logging(AppSettings.from_env({}))  # as at start-up: filters the root's handlers
    token = mint(claims(issuer), rsa)
    refused = mint(claims(issuer), stranger)

    with (
        caplog.at_level(logging.DEBUG),
        ServedApp(jwt_service(issuer), name="jwt-logs") as app,
    ):
        chat_sse(app, token)
        assert post(app, "/chat", bearer(refused)).status_code == 401
        app.runs(1)

    expected = Principal.for_jwt(issuer.url, "user-1", "alice@example.com", "pro").id
    finished = [r for r in caplog.records if r.getMessage() == "run finished"]
    assert [getattr(r, "principal", None) for r in finished] == [expected]
    everything = caplog.text + "".join(str(vars(record)) for record in caplog.records)
    for secret in (token, refused, *token.split("."), *refused.split(".")[1:]):
        assert secret not in everything


# ---- traces: the principal id on the run's spans -----------------------------------------------


def test_the_run_s_spans_carry_the_principal_id(
    llm: ScriptedLLM, issuer: IssuerServer, ecdsa: SigningKey
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentloop import tracing

    answer_everything(llm)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    token = mint(claims(issuer), ecdsa)
    try:
        with ServedApp(jwt_service(issuer), name="jwt-traces") as app:
            chat_sse(app, token)
            app.runs(1)
    finally:
        tracing.install(None)

    expected = Principal.for_jwt(issuer.url, "user-1", "alice@example.com", "pro").id
    spans = exporter.get_finished_spans()
    assert {span.name for span in spans} == {"invoke_agent agentloop", "chat m"}
    assert all((span.attributes or {}).get("agentloop.principal") == expected for span in spans)
    assert all(token not in str(dict(span.attributes or {})) for span in spans)
