"""The deployed sandbox: per-tenant isolation end to end, and the template's network and tenancy.

* Tenants: the chat app (bearer, iam and none auth) runs execute_code through the scripted
  model on the lambda backend - real boto3 against the loopback fake of the Lambda Invoke API,
  with the sandbox function registered as per-tenant, so an invoke without ``X-Amz-Tenant-Id``
  fails as it does on Lambda. Which TenantId each caller's runs carry; research jobs; a
  setting that disagrees with the function is a clear error.
* Template: ``template.yaml`` read as YAML, CloudFormation's short tags as their long form:
  the sandbox's VPC has no way out, its security group lets nothing through, the ENI
  permissions are Lambda's only, the function is per-tenant and its callers say so.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import sandbox_handler
from agentloop.auth import BearerAuth, hash_token
from agentloop.research.jobs import JobMessage
from agentloop.research.runner import JobRunner
from agentloop.research.store import LocalResultStore
from agentloop.sandbox import SandboxLimits
from agentloop.sandbox.backends import LambdaBackend, lambda_tenant_id
from agentloop.sandbox.runner import SandboxError
from agentloop.sandbox.settings import SandboxSettings
from agentloop.server.identity import allow_anyone, api_keys, iam_caller
from agentloop.server.service import ChatService
from agentloop.tools.execute_code import execute_code_tool
from agentloop.tools.registry import ToolRegistry
from chat_app import create_app
from tests.cloudformation import load_template
from tests.fakes.lambda_api import SANDBOX_FUNCTION, TENANT_MISMATCH, FakeLambda
from tests.fakes.scripted_llm import RecordedRequest, Reply, ScriptedLLM, call
from tests.helpers import TEST_CONFIG, parse_sse, tool_payload

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

LOCAL = "http://127.0.0.1"
TOKEN_A = "al_tenant-test-token-a"
TOKEN_B = "al_tenant-test-token-b"
# Lambda's TenantId (API reference, Invoke): 1-256 characters of this set.
TENANT_ID = re.compile(r"[a-zA-Z0-9._:/=+\-@ ]{1,256}")
PROGRAM = "print(6 * 7)"


# ---- tenants: who each run is for ---------------------------------------------------------------


def per_tenant_settings(api: FakeLambda, tenancy: str = "per_tenant") -> SandboxSettings:
    return SandboxSettings.model_validate(
        {
            "backend": "lambda",
            "function": SANDBOX_FUNCTION,
            "endpoint_url": api.url,
            "region": "us-east-1",
            "tenancy": tenancy,
        }
    )


@pytest.fixture
def per_tenant_api(lambda_api: FakeLambda) -> FakeLambda:
    """The fake with the sandbox function as Lambda creates it with TenancyConfig PER_TENANT."""
    lambda_api.register(SANDBOX_FUNCTION, sandbox_handler.handler, timeout_s=60, per_tenant=True)
    return lambda_api


def run_code_then_answer(request: RecordedRequest) -> Reply:
    """Any number of runs: ask for the program, then answer with what the tool returned."""
    if request.messages[-1]["role"] != "tool":
        return Reply(tool_calls=[call("execute_code", code=PROGRAM, timeout_s=5)])
    payload = tool_payload(request.messages[-1]["content"])
    if payload["ok"]:
        return Reply(text=f"It printed {payload['result']['stdout'].strip()}.")
    return Reply(text=f"Failed: {payload['error']}")


def chat_service(api: FakeLambda, mode: str, tokens: tuple[str, ...] = ()) -> ChatService:
    hashes = [hash_token(token) for token in tokens]
    return ChatService(
        config=TEST_CONFIG,
        tools=ToolRegistry([execute_code_tool(per_tenant_settings(api))]),
        authenticate={
            "bearer": api_keys(BearerAuth(lambda: hashes)),
            "iam": iam_caller,
            "none": allow_anyone,
        }[mode],
        auth_mode=mode,  # type: ignore[arg-type]
    )


def chat(client: TestClient, model: str, **headers: str) -> str:
    """``POST /chat`` to the end; the answer text."""
    body = {"messages": [{"role": "user", "content": "What is 6 * 7?"}], "model": model}
    body["tools"] = ["execute_code"]
    with client.stream("POST", "/chat", json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        frames = parse_sse(response.iter_lines())
    kind, done = frames[-1]
    assert kind == "done"
    assert done is not None
    text: str = done["text"]
    return text


def completion(client: TestClient, model: str, **headers: str) -> str:
    """``POST /v1/chat/completions`` (not streamed); the answer text."""
    body = {
        "model": model,
        "stream": False,
        "messages": [{"role": "user", "content": "What is 6 * 7?"}],
        "agentloop": {"tools": ["execute_code"]},
    }
    response = client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_each_bearer_token_is_its_own_tenant_on_both_endpoints(
    llm: ScriptedLLM, model: str, per_tenant_api: FakeLambda
) -> None:
    llm.respond_with(run_code_then_answer)
    service = chat_service(per_tenant_api, "bearer", (TOKEN_A, TOKEN_B))

    with TestClient(create_app(service), base_url=LOCAL) as client:
        answers = [
            chat(client, model, **bearer(TOKEN_A)),
            completion(client, model, **bearer(TOKEN_A)),
            chat(client, model, **bearer(TOKEN_B)),
        ]

    assert answers == ["It printed 42."] * 3
    tenants = [invocation.tenant for invocation in per_tenant_api.invocations]
    # An unnamed key's principal is named by the first 8 hex digits of its SHA-256:
    # non-secret, and plain enough for Lambda to take as it is.
    a = "key:" + hashlib.sha256(TOKEN_A.encode()).hexdigest()[:8]
    b = "key:" + hashlib.sha256(TOKEN_B.encode()).hexdigest()[:8]
    assert tenants == [a, a, b]
    assert TOKEN_A not in str(tenants)
    assert all(invocation.event["code"] == PROGRAM for invocation in per_tenant_api.invocations)


def request_context(user_arn: str) -> str:
    """What Lambda Web Adapter forwards for a SigV4-signed Function URL request."""
    iam = {"accountId": "123456789012", "callerId": "AIDAEXAMPLE", "userArn": user_arn}
    return json.dumps({"authorizer": {"iam": iam}, "requestId": "r-1"})


def test_iam_callers_are_tenants_by_arn_and_the_adapter_s_context_wins(
    llm: ScriptedLLM, per_tenant_api: FakeLambda
) -> None:
    llm.respond_with(run_code_then_answer)
    alice = "arn:aws:iam::123456789012:user/alice"
    bob = "arn:aws:sts::123456789012:assumed-role/analyst/bob-session"
    service = chat_service(per_tenant_api, "iam")

    with TestClient(create_app(service), base_url=LOCAL) as client:
        chat(client, "groq:m", **{"x-amzn-request-context": request_context(alice)})
        chat(client, "groq:m", **{"x-amzn-request-context": request_context(bob)})
        chat(client, "groq:m", **{"x-amzn-request-context": request_context(alice)})
        # A caller's own header first, the adapter's appended after it (older adapters):
        # the adapter's, the last, is the one read.
        with client.stream(
            "POST",
            "/chat",
            json={
                "messages": [{"role": "user", "content": "6 * 7?"}],
                "model": "groq:m",
                "tools": ["execute_code"],
            },
            headers=[
                ("x-amzn-request-context", request_context(alice)),
                ("x-amzn-request-context", request_context(bob)),
            ],
        ) as response:
            assert parse_sse(response.iter_lines())[-1][0] == "done"

    tenants = [invocation.tenant for invocation in per_tenant_api.invocations]
    assert len(tenants) == 4
    assert tenants[0] == tenants[2] != tenants[1] == tenants[3]
    for tenant in tenants:
        assert tenant is not None
        # An ARN has "/": hashed, which also keeps the caller's name out of the sandbox.
        assert re.fullmatch(r"sha256:[0-9a-f]{40}", tenant)
    assert tenants[0] == lambda_tenant_id(f"iam:{alice}")


@pytest.mark.parametrize(
    "header",
    [
        "[" * 10_000,
        "not json",
        '{"authorizer": {"iam": {"userArn": 7}}}',
        '"\\ud800"',
        # no IAM ARN is this long, or holds a line break (it would forge a log line)
        '{"authorizer": {"iam": {"userArn": "arn:aws:iam::1:user/' + "a" * 3_000 + '"}}}',
        '{"authorizer": {"iam": {"userArn": "arn:aws:iam::1:user/a\\nINFO forged"}}}',
    ],
)
def test_a_hostile_request_context_is_an_unknown_iam_caller(
    llm: ScriptedLLM, per_tenant_api: FakeLambda, header: str
) -> None:
    """Locally anyone can send this header: bounded like a body, never a 500."""
    llm.respond_with(run_code_then_answer)
    service = chat_service(per_tenant_api, "iam")

    with TestClient(create_app(service), base_url=LOCAL) as client:
        chat(client, "groq:m", **{"x-amzn-request-context": header})

    [invocation] = per_tenant_api.invocations
    assert invocation.tenant == lambda_tenant_id("iam:unknown")


def test_without_auth_every_caller_is_one_local_tenant(
    llm: ScriptedLLM, per_tenant_api: FakeLambda
) -> None:
    llm.respond_with(run_code_then_answer)
    with TestClient(create_app(chat_service(per_tenant_api, "none")), base_url=LOCAL) as client:
        chat(client, "openai:gpt-4o-mini")
        chat(client, "openai:gpt-4o-mini", **bearer("anything"))

    assert [i.tenant for i in per_tenant_api.invocations] == ["local", "local"]


async def test_each_research_job_is_its_own_tenant(
    llm: ScriptedLLM, per_tenant_api: FakeLambda, tmp_path: Path
) -> None:
    llm.respond_with(run_code_then_answer)
    runner = JobRunner(
        store=LocalResultStore(tmp_path),
        config=TEST_CONFIG,
        tools=ToolRegistry([execute_code_tool(per_tenant_settings(per_tenant_api))]),
    )

    for job_id in ("alpha", "beta"):
        message = JobMessage.model_validate(
            {
                "job": {
                    "id": job_id,
                    "prompt": "Compute 6 * 7.",
                    "model": "groq:m",
                    "tools": ["execute_code"],
                },
                "execution_id": "exec-1",
                "scheduled_time": "2025-06-02T06:00:00Z",
            }
        )
        outcome = await runner.run(message)
        assert outcome.status == "succeeded", outcome.error

    tenants = [i.tenant for i in per_tenant_api.invocations]
    assert tenants == ["research:alpha", "research:beta"]


async def test_a_per_tenant_function_refuses_a_shared_setting_clearly(
    per_tenant_api: FakeLambda,
) -> None:
    backend = per_tenant_settings(per_tenant_api, tenancy="shared").make_backend()

    with pytest.raises(SandboxError) as caught:
        await backend.run(PROGRAM, SandboxLimits(timeout_s=2), tenant="bearer:1a2b3c4d")

    assert caught.value.message == (
        f"the sandbox function {SANDBOX_FUNCTION!r} refused the call: {TENANT_MISMATCH}"
    )
    assert "AGENTLOOP_SANDBOX_TENANCY" in (caught.value.hint or "")
    assert per_tenant_api.invocations == []


async def test_a_shared_function_refuses_a_tenant_id_clearly(lambda_api: FakeLambda) -> None:
    backend = per_tenant_settings(lambda_api).make_backend()

    with pytest.raises(SandboxError) as caught:
        await backend.run(PROGRAM, SandboxLimits(timeout_s=2), tenant="bearer:1a2b3c4d")

    assert TENANT_MISMATCH in caught.value.message
    assert lambda_api.invocations == []


async def test_a_run_without_a_caller_is_not_sent(per_tenant_api: FakeLambda) -> None:
    backend = per_tenant_settings(per_tenant_api).make_backend()

    with pytest.raises(SandboxError) as caught:
        await backend.run(PROGRAM, SandboxLimits(timeout_s=2))

    assert (
        caught.value.message == "the code sandbox isolates callers, but this run has no caller id"
    )
    assert per_tenant_api.invocations == []


async def test_an_inactive_vpc_function_is_a_retry_later_error(
    per_tenant_api: FakeLambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After 14 idle days a VPC function is Inactive: invokes fail until Lambda re-attaches it."""
    monkeypatch.setattr(per_tenant_api, "not_ready", True)
    backend = per_tenant_settings(per_tenant_api).make_backend()

    with pytest.raises(SandboxError) as caught:
        await backend.run(PROGRAM, SandboxLimits(timeout_s=2), tenant="anonymous")

    assert caught.value.message.startswith("the code sandbox is not ready yet: The function is")
    assert (caught.value.hint or "").startswith("try again in a minute")


@pytest.mark.parametrize(
    ("caller", "expected"),
    [
        ("anonymous", "anonymous"),
        ("bearer:1a2b3c4d", "bearer:1a2b3c4d"),
        ("research:nightly_report-2", "research:nightly_report-2"),
        ("iam:arn:aws:iam::123456789012:user/alice", None),
        ("research:" + "x" * 300, None),
        ("bearer:naïve tenant,with;odd chars", None),
    ],
)
def test_tenant_ids_always_fit_lambda_s_constraints(caller: str, expected: str | None) -> None:
    tenant = lambda_tenant_id(caller)

    assert TENANT_ID.fullmatch(tenant)
    assert tenant == lambda_tenant_id(caller)
    if expected is None:
        assert tenant == "sha256:" + hashlib.sha256(caller.encode()).hexdigest()[:40]
    else:
        assert tenant == expected


def test_the_installed_botocore_sends_tenant_id_as_the_documented_header() -> None:
    """boto3 must know ``TenantId`` (botocore 1.41+) and put it where Lambda reads it."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("lambda")
    member = model.operation_model("Invoke").input_shape.members["TenantId"]

    assert member.serialization == {"location": "header", "name": "X-Amz-Tenant-Id"}
    assert (member.metadata["min"], member.metadata["max"]) == (1, 256)


# ---- the template -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def resources(template: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = template["Resources"]
    return found


def of_type(resources: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {name: r for name, r in resources.items() if r["Type"].startswith(prefix)}


def test_sandbox_network_is_a_parameter_defaulting_to_none(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["SandboxNetwork"]
    assert parameter["Default"] == "none"
    assert parameter["AllowedValues"] == ["none", "internet"]
    groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    [sandbox] = [g for g in groups if g["Label"]["default"].startswith("Sandbox function")]
    assert "SandboxNetwork" in sandbox["Parameters"]
    condition = template["Conditions"]["SandboxNoNetwork"]
    assert condition == {"Fn::Equals": [{"Ref": "SandboxNetwork"}, "none"]}


def test_the_sandbox_function_is_in_the_vpc_only_without_network(
    resources: dict[str, Any],
) -> None:
    vpc_config = resources["SandboxFunction"]["Properties"]["VpcConfig"]
    condition, inside, outside = vpc_config["Fn::If"]
    assert condition == "SandboxNoNetwork"
    assert outside == {"Ref": "AWS::NoValue"}
    assert inside["SecurityGroupIds"] == [{"Ref": "SandboxSecurityGroup"}]
    subnets = [ref["Ref"] for ref in inside["SubnetIds"]]
    assert len(subnets) == 2
    zones = []
    for name in subnets:
        subnet = resources[name]
        assert subnet["Type"] == "AWS::EC2::Subnet"
        assert subnet["Properties"]["VpcId"] == {"Ref": "SandboxVpc"}
        assert subnet["Properties"].get("MapPublicIpOnLaunch", False) is False
        zones.append(subnet["Properties"]["AvailabilityZone"])
    assert zones == [{"Fn::Select": [i, {"Fn::GetAZs": ""}]} for i in (0, 1)]
    # With SandboxNetwork=internet none of it exists.
    for name, resource in of_type(resources, "AWS::EC2::").items():
        assert resource.get("Condition") == "SandboxNoNetwork", name
    assert resources["SandboxNetworkPolicy"]["Condition"] == "SandboxNoNetwork"


def test_the_vpc_has_no_way_out(resources: dict[str, Any]) -> None:
    ec2 = {r["Type"] for r in of_type(resources, "AWS::EC2::").values()}
    # Only the VPC, its subnets and the group: no internet or NAT gateway, egress-only gateway,
    # VPC endpoint, route, route table, peering, transit gateway or VPN.
    assert ec2 == {"AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::SecurityGroup"}
    assert not of_type(resources, "AWS::Route53Resolver::")
    assert not of_type(resources, "AWS::NetworkFirewall::")
    vpc = resources["SandboxVpc"]["Properties"]
    # Security groups do not filter the Amazon DNS server: DNS is off altogether.
    assert vpc["EnableDnsSupport"] is False
    assert vpc.get("EnableDnsHostnames", False) is False
    assert "Ipv6CidrBlock" not in vpc
    assert not of_type(resources, "AWS::EC2::VPCCidrBlock")


def test_the_security_group_lets_nothing_in_or_out(resources: dict[str, Any]) -> None:
    group = resources["SandboxSecurityGroup"]["Properties"]
    assert group["VpcId"] == {"Ref": "SandboxVpc"}
    assert "SecurityGroupIngress" not in group
    [rule] = group["SecurityGroupEgress"]  # exactly one: otherwise EC2 adds allow-all
    assert set(rule) <= {"IpProtocol", "FromPort", "ToPort", "CidrIp", "Description"}
    destination = ipaddress.ip_network(rule["CidrIp"])
    assert destination.num_addresses == 1
    assert destination.is_loopback or str(destination) == "255.255.255.255/32"
    assert not of_type(resources, "AWS::EC2::SecurityGroupEgress")
    assert not of_type(resources, "AWS::EC2::SecurityGroupIngress")


def test_the_eni_permissions_are_lambda_s_not_the_code_s(resources: dict[str, Any]) -> None:
    role = resources["SandboxRole"]["Properties"]
    assert "Policies" not in role
    assert "ManagedPolicyArns" not in role
    policy = resources["SandboxNetworkPolicy"]
    assert policy["Type"] == "AWS::IAM::RolePolicy"
    assert policy["Properties"]["RoleName"] == {"Ref": "SandboxRole"}
    allow, deny = policy["Properties"]["PolicyDocument"]["Statement"]
    # The Lambda developer guide's list for a VPC function's execution role, on "*".
    documented = {
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    }
    assert (allow["Effect"], set(allow["Action"]), allow["Resource"]) == ("Allow", documented, "*")
    assert "Condition" not in allow
    assert deny["Effect"] == "Deny"
    assert set(deny["Action"]) >= documented
    assert deny["Resource"] == "*"
    [(operator, condition)] = deny["Condition"].items()
    assert operator == "ArnLike"
    assert list(condition) == ["lambda:SourceFunctionArn"]
    # The security group goes before the permissions Lambda needs to remove its interfaces.
    assert resources["SandboxSecurityGroup"]["DependsOn"] == "SandboxNetworkPolicy"


def test_the_sandbox_function_isolates_tenants_and_its_callers_say_so(
    resources: dict[str, Any],
) -> None:
    sandbox = resources["SandboxFunction"]["Properties"]
    assert sandbox["TenancyConfig"] == {"TenantIsolationMode": "PER_TENANT"}
    # What tenant isolation does not support.
    for incompatible in ("FunctionUrlConfig", "ProvisionedConcurrencyConfig", "SnapStart"):
        assert incompatible not in sandbox
    assert not sandbox.get("Events")
    for name, resource in resources.items():
        if resource["Type"] in ("AWS::Lambda::EventSourceMapping", "AWS::Lambda::Url"):
            target = resource["Properties"].get("FunctionName") or resource["Properties"].get(
                "TargetFunctionArn"
            )
            assert "SandboxFunction" not in str(target), name

    callers = {
        name: r["Properties"]["Environment"]["Variables"]
        for name, r in of_type(resources, "AWS::Serverless::Function").items()
        if "AGENTLOOP_SANDBOX_FUNCTION"
        in r["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert set(callers) == {"ChatFunction", "ResearchWorkerFunction"}
    for name, variables in callers.items():
        assert variables["AGENTLOOP_SANDBOX_FUNCTION"] == {"Ref": "SandboxFunction"}, name
        settings = SandboxSettings.from_env(
            {
                "AGENTLOOP_SANDBOX_FUNCTION": "agentloop-sandbox",
                "AGENTLOOP_SANDBOX_TENANCY": variables["AGENTLOOP_SANDBOX_TENANCY"],
            }
        )
        backend = settings.make_backend()
        assert isinstance(backend, LambdaBackend)
        assert backend.tenancy == "per_tenant", name


def test_existing_parameters_and_outputs_are_kept(template: dict[str, Any]) -> None:
    assert set(template["Outputs"]) >= {
        "ChatUrl",
        "ChatFunctionName",
        "SecretArn",
        "AgentLayerArn",
        "SandboxFunctionName",
        "ResearchResultsBucketName",
        "ResearchScheduleName",
        "ResearchQueueUrl",
        "ResearchDeadLetterQueueUrl",
        "ResearchPlannerFunctionName",
        "ResearchWorkerFunctionName",
        "ResearchIdempotencyTableName",
    }
    for name in ("SandboxConcurrency", "SandboxMemorySize", "SandboxLogs", "AuthMode"):
        assert name in template["Parameters"]
    assert template["Outputs"]["SandboxVpcId"]["Condition"] == "SandboxNoNetwork"
