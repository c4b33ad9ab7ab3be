"""Static API keys with names: each holder its own principal, revoked by removing the entry.

Over HTTP against the served app (the key list is the one ``BearerAuth`` reads on every
check, as the cached secret is), and through ``python -m agentloop secret`` on moto's Secrets
Manager: ``add-token --name`` stores ``name:<sha256>``, the function then knows the caller by
that name, and ``remove-token --name`` revokes every key of it.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import httpx
import pytest

from agentloop.auth import (
    AuthError,
    BearerAuth,
    hash_token,
    parse_key_entry,
    token_hashes_from_secret,
)
from agentloop.cli import main
from agentloop.principal import Principal
from agentloop.server.identity import api_keys
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.sample_tools import whoami_tool
from tests.served import ServedApp, make_service

ALICE, BOB, OLD = "al_alice-key", "al_bob-key", "al_unnamed-key"
SECRET = "agentloop/agentloop"


def call_whoami(request: RecordedRequest) -> Reply:
    if request.messages[-1]["role"] != "tool":
        return Reply(tool_calls=[call("whoami")])
    return Reply(text="done")


def chat(app: ServedApp, token: str) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "who am I?"}], "model": "groq:m"}
    headers = {"authorization": f"Bearer {token}"}
    return httpx.post(f"{app.url}/chat", json=body, headers=headers, timeout=30)


def test_two_named_keys_are_two_principals_and_a_removed_key_is_refused(
    llm: ScriptedLLM,
) -> None:
    llm.respond_with(call_whoami)
    stored = [f"alice:{hash_token(ALICE)}", f"bob:{hash_token(BOB)}", hash_token(OLD)]
    seen: list[tuple[Any, Any]] = []
    service = make_service([whoami_tool(seen)])
    service.authenticate = api_keys(BearerAuth(lambda: stored))

    with ServedApp(service, name="named-keys") as app:
        answers = [chat(app, token) for token in (ALICE, BOB, OLD)]
        stored.remove(f"bob:{hash_token(BOB)}")  # bob's key revoked
        revoked = chat(app, BOB)
        still = chat(app, ALICE)

    assert [a.status_code for a in answers] == [200, 200, 200]
    assert revoked.status_code == 401
    assert revoked.headers["www-authenticate"] == 'Bearer realm="agentloop", error="invalid_token"'
    assert still.status_code == 200
    principals = [principal for principal, _ in seen]
    assert principals == [
        Principal.for_key("alice"),
        Principal.for_key("bob"),
        Principal.for_key(hash_token(OLD)[:8]),  # an unnamed key: named by its id
        Principal.for_key("alice"),
    ]
    assert [tenant for _, tenant in seen] == [p.id for p in principals]
    assert len({p.id for p in principals}) == 3


@pytest.mark.parametrize(
    ("entry", "name"),
    [
        ("alice:" + "ab" * 32, "alice"),
        (" alice@example.com:" + "AB" * 32 + " ", "alice@example.com"),
        ("ab" * 32, "abababab"),
        ("ci-bot_2.v1+x:" + "0f" * 32, "ci-bot_2.v1+x"),
    ],
)
def test_key_entries_with_and_without_names(entry: str, name: str) -> None:
    key = parse_key_entry(entry)
    assert key is not None
    assert key.name == name
    assert key.digest == entry.strip().rpartition(":")[2].lower().encode()


@pytest.mark.parametrize(
    "entry",
    [
        ":" + "ab" * 32,  # an empty name
        "a b:" + "ab" * 32,
        "a\nb:" + "ab" * 32,
        "-dash:" + "ab" * 32,
        "x" * 65 + ":" + "ab" * 32,
        "a:b:" + "ab" * 32,
        "alice:" + "ab" * 31,
        "alice:",
        None,
        7,
    ],
)
def test_malformed_key_entries_are_ignored(entry: object) -> None:
    assert parse_key_entry(entry) is None


def test_two_keys_of_one_name_are_one_principal() -> None:
    """A rotation: alice's old and new key both work, as alice, until the old is removed."""
    stored = [f"alice:{hash_token('al_old')}", f"alice:{hash_token('al_new')}"]
    auth = BearerAuth(lambda: stored)
    assert auth.principal("Bearer al_old") == auth.principal("Bearer al_new")
    stored.pop(0)
    with pytest.raises(AuthError):
        auth.check("Bearer al_old")


# ---- python -m agentloop secret / token --------------------------------------------------------


def run(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: Any) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def sm(mocked_aws: None) -> Any:
    boto3 = pytest.importorskip("boto3")
    client = boto3.client("secretsmanager")
    value = {"GROQ_API_KEY": "gsk", "auth_token_sha256": [hash_token(OLD)]}
    client.create_secret(Name=SECRET, SecretString=json.dumps(value))
    return client


def stored_keys(sm: Any) -> list[str]:
    keys: list[str] = json.loads(sm.get_secret_value(SecretId=SECRET)["SecretString"])[
        "auth_token_sha256"
    ]
    return keys


def test_add_token_with_a_name_is_that_caller_and_remove_by_name_revokes_it(
    sm: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    where = ["--secret-id", SECRET]
    code, out, err = run(["secret", "add-token", *where, "--name", "alice"], monkeypatch, capsys)
    assert code == 0, err
    labelled = dict(line.split(":", 1) for line in out.splitlines())
    token, digest = labelled["token"].strip(), labelled["sha256"].strip()
    assert labelled["name"].strip() == "alice"
    assert stored_keys(sm) == [hash_token(OLD), f"alice:{digest}"]
    auth = BearerAuth(token_hashes_from_secret(SECRET, max_age_s=0))
    assert auth.principal(f"Bearer {token}") == Principal.for_key("alice")

    code, out, _ = run(["secret", "list", *where], monkeypatch, capsys)
    assert f"alice:{digest[:8]}" in out
    assert digest not in out

    code, out, _ = run(["secret", "remove-token", *where, "--name", "alice"], monkeypatch, capsys)
    assert code == 0
    assert "1 key(s) named alice removed" in out
    assert stored_keys(sm) == [hash_token(OLD)]
    with pytest.raises(AuthError):
        auth.check(f"Bearer {token}")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["add-token", "--name", "not a name"], "--name: a key name is"),
        (["add-token", "--name", "a:b"], "--name: a key name is"),
        (["remove-token", "--name", "nobody"], "no key is named 'nobody'"),
        (["remove-token"], "name the token by its id, or its key's name"),
        (["remove-token", "abcdef01", "--name", "alice"], "name the token by its id, or"),
    ],
)
def test_named_key_refusals_change_nothing(
    sm: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any, argv: list[str], message: str
) -> None:
    code, out, err = run(["secret", *argv, "--secret-id", SECRET], monkeypatch, capsys)
    assert code == 1
    assert message in err
    assert "token:" not in out
    assert stored_keys(sm) == [hash_token(OLD)]


def test_the_token_helper_prints_a_named_entry(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code, out, _ = run(["token", "--name", "ci-bot"], monkeypatch, capsys)
    assert code == 0
    labelled = {k: v.strip() for k, v in (line.split(":", 1) for line in out.splitlines())}
    assert labelled["entry"] == f"ci-bot:{hash_token(labelled['token'])}"
    assert parse_key_entry(labelled["entry"]) is not None
