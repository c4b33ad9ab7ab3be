"""template.yaml's sign-in: AuthMode jwt with an existing issuer, or a Cognito user pool it makes.

The template is read as data (``tests.cloudformation``) and the chat function's environment is
worked out for each way of deploying, by evaluating the few intrinsics it uses (``Fn::If``,
``Ref``, ``Fn::Sub``, the conditions) the way CloudFormation does. The environments found are
then read by the app's own ``JwtSettings.from_env``, so a wiring the app cannot use fails here.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentloop.oidc import JwtSettings
from tests.cloudformation import Stack, load_template

REGION, ACCOUNT = "eu-west-1", "123456789012"
POOL_ID, CLIENT_ID = "eu-west-1_AbCdEf123", "4tq2examplec1ient1d"
# What Ref gives for the created resources (their physical ids) and the pseudo parameters.
PHYSICAL = {
    "UserPool": POOL_ID,
    "UserPoolClient": CLIENT_ID,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": None,
}
JWT_VARIABLES = (
    "AGENTLOOP_JWT_ISSUER",
    "AGENTLOOP_JWT_AUDIENCE",
    "AGENTLOOP_JWT_CLIENT_ID",
    "AGENTLOOP_JWT_TIER_CLAIM",
)
COGNITO_RESOURCES = {"UserPool", "UserPoolClient", "UserPoolDomain"}


def deployed(template: dict[str, Any], **parameters: str) -> Stack:
    """The template deployed with ``parameters``, the created resources' ids as above."""
    return Stack(template, PHYSICAL, **parameters)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def test_by_default_nothing_of_sign_in_is_made_or_set(template: dict[str, Any]) -> None:
    stack = deployed(template)
    assert stack.parameters["AuthMode"] == "bearer"
    assert not stack.created() & COGNITO_RESOURCES
    environment = stack.chat_environment()
    assert environment["AGENTLOOP_AUTH_MODE"] == "bearer"
    assert not set(JWT_VARIABLES) & set(environment)
    assert stack.rule_failures() == []
    # CreateUserPool alone, without AuthMode jwt, makes nothing either (and a rule says why).
    asked = deployed(template, CreateUserPool="true")
    assert not asked.created() & COGNITO_RESOURCES
    assert asked.rule_failures() == ["CreateUserPool=true needs AuthMode=jwt."]


def test_an_existing_issuer_and_audience_reach_the_chat_function(
    template: dict[str, Any],
) -> None:
    stack = deployed(
        template,
        AuthMode="jwt",
        JwtIssuer="https://example.eu.auth0.com/",
        JwtAudience="https://chat.example.com/api",
        JwtClientId="pageClient123",
        JwtTierClaim="https://chat.example.com/tier",
    )
    assert stack.rule_failures() == []
    assert not stack.created() & COGNITO_RESOURCES
    environment = stack.chat_environment()
    assert environment["AGENTLOOP_AUTH_MODE"] == "jwt"
    assert {name: environment[name] for name in JWT_VARIABLES} == {
        "AGENTLOOP_JWT_ISSUER": "https://example.eu.auth0.com/",
        "AGENTLOOP_JWT_AUDIENCE": "https://chat.example.com/api",
        "AGENTLOOP_JWT_CLIENT_ID": "pageClient123",
        "AGENTLOOP_JWT_TIER_CLAIM": "https://chat.example.com/tier",
    }
    settings = JwtSettings.from_env(environment)
    assert settings.issuer == "https://example.eu.auth0.com/"
    assert settings.audience == ("https://chat.example.com/api",)
    assert settings.tier_claim == "https://chat.example.com/tier"


def test_jwt_without_an_issuer_or_a_pool_is_refused_before_deploying(
    template: dict[str, Any],
) -> None:
    assert deployed(template, AuthMode="jwt").rule_failures() == [
        "AuthMode=jwt needs JwtIssuer (or CreateUserPool=true).",
        "AuthMode=jwt needs JwtAudience (or CreateUserPool=true).",
    ]
    pattern = re.compile(template["Parameters"]["JwtIssuer"]["AllowedPattern"])
    assert pattern.fullmatch("https://accounts.google.com")
    for refused in ("http://issuer.example.com", "issuer.example.com", "https://a b"):
        assert not pattern.fullmatch(refused), refused


def test_a_created_user_pool_is_the_issuer_and_its_client_the_audience(
    template: dict[str, Any],
) -> None:
    stack = deployed(
        template,
        AuthMode="jwt",
        CreateUserPool="true",
        # Ignored: the pool's own issuer and client win.
        JwtIssuer="https://elsewhere.example.com",
        JwtAudience="other",
        JwtTierClaim="cognito:groups",
    )
    assert stack.rule_failures() == []
    assert stack.created() >= COGNITO_RESOURCES
    environment = stack.chat_environment()
    issuer = f"https://cognito-idp.{REGION}.amazonaws.com/{POOL_ID}"
    assert environment["AGENTLOOP_JWT_ISSUER"] == issuer
    assert environment["AGENTLOOP_JWT_AUDIENCE"] == CLIENT_ID
    assert environment["AGENTLOOP_JWT_CLIENT_ID"] == CLIENT_ID
    assert environment["AGENTLOOP_JWT_TIER_CLAIM"] == "cognito:groups"
    settings = JwtSettings.from_env(environment)
    assert (settings.issuer, settings.audience) == (issuer, (CLIENT_ID,))
    # The domain: the prefix given, else one named after the account.
    domain = template["Resources"]["UserPoolDomain"]["Properties"]
    assert stack.value(domain["UserPoolId"]) == POOL_ID
    assert stack.value(domain["Domain"]) == f"agentloop-{ACCOUNT}"
    named = deployed(template, AuthMode="jwt", CreateUserPool="true", UserPoolDomainPrefix="chat-x")
    assert named.value(domain["Domain"]) == "chat-x"
    outputs = template["Outputs"]
    for name in ("UserPoolId", "UserPoolClientId", "SignInUrl"):
        assert outputs[name]["Condition"] == "MakeUserPool", name


def test_the_page_s_client_runs_the_code_flow_only_and_has_no_secret(
    template: dict[str, Any],
) -> None:
    client = template["Resources"]["UserPoolClient"]["Properties"]
    # A public client: no secret, so the page proves itself with PKCE (the code verifier).
    assert client["GenerateSecret"] is False
    assert client["AllowedOAuthFlowsUserPoolClient"] is True
    assert client["AllowedOAuthFlows"] == ["code"]  # no implicit, no client_credentials
    assert {"openid", "email", "profile"} <= set(client["AllowedOAuthScopes"])
    assert client["SupportedIdentityProviders"] == ["COGNITO"]
    # No password flows: people sign in on the hosted pages, the page only refreshes.
    assert client["ExplicitAuthFlows"] == ["ALLOW_REFRESH_TOKEN_AUTH"]
    assert client["EnableTokenRevocation"] is True
    urls = {"Ref": "SignInCallbackUrls"}
    assert client["CallbackURLs"] == urls
    assert client["LogoutURLs"] == urls
    stack = deployed(template, AuthMode="jwt", CreateUserPool="true")
    assert stack.value(client["CallbackURLs"]) == "http://localhost:8000/"  # make dev's page
    assert stack.value(client["UserPoolId"]) == POOL_ID


def test_only_administrators_add_people_to_the_pool(template: dict[str, Any]) -> None:
    pool = template["Resources"]["UserPool"]
    assert pool["Properties"]["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}
    assert pool["Properties"]["UsernameAttributes"] == ["email"]
    assert (pool["DeletionPolicy"], pool["UpdateReplacePolicy"]) == ("Retain", "Retain")
    for name in COGNITO_RESOURCES:
        assert template["Resources"][name]["Condition"] == "MakeUserPool", name


def test_the_sign_in_parameters_are_grouped_and_auth_mode_offers_jwt(
    template: dict[str, Any],
) -> None:
    assert template["Parameters"]["AuthMode"]["AllowedValues"] == ["bearer", "jwt", "iam", "none"]
    groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    [sign_in] = [g for g in groups if g["Label"]["default"].startswith("Sign-in")]
    assert sign_in["Parameters"] == [
        "JwtIssuer",
        "JwtAudience",
        "JwtClientId",
        "JwtTierClaim",
        "CreateUserPool",
        "UserPoolDomainPrefix",
        "SignInCallbackUrls",
    ]
    # jwt mode keeps the Function URL public: the app checks the tokens.
    assert not deployed(template, AuthMode="jwt").condition("UseIamAuth")
