"""``make invoke EVENT=events/x.json``: what ``sam local invoke`` does, without Docker.

An HTTP event (a Function URL request, payload format 2.0) becomes a real HTTP
request to the chat app, made the way Lambda Web Adapter makes it: method, raw path
and query string, headers and cookies, the body base64-decoded when it says so, and
the invocation context in ``x-amzn-lambda-context`` (with a deadline) and the request
context in ``x-amzn-request-context``. The app runs under uvicorn on a free loopback
port for the duration; its streamed body is printed as it arrives.

This file lives outside every function's code directory, so it is never deployed.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHAT_DIR = ROOT / "functions" / "chat"


def is_http_event(event: dict[str, Any]) -> bool:
    return isinstance(event.get("requestContext"), dict) and "http" in event["requestContext"]


def adapter_request(
    event: dict[str, Any], *, timeout_s: float, function_name: str = "agentloop-chat"
) -> tuple[str, str, dict[str, str], bytes]:
    """Method, path with query, headers and body as Lambda Web Adapter would send them."""
    context = event["requestContext"]
    method = context["http"]["method"]
    path = event.get("rawPath") or context["http"].get("path") or "/"
    query = event.get("rawQueryString") or ""
    target = f"{path}?{query}" if query else path
    headers = {k.lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    if event.get("cookies"):
        headers["cookie"] = "; ".join(event["cookies"])
    raw_body = event.get("body") or ""
    body = base64.b64decode(raw_body) if event.get("isBase64Encoded") else raw_body.encode()
    request_id = context.get("requestId") or str(uuid.uuid4())
    headers["x-amzn-request-context"] = json.dumps(context)
    arn = f"arn:aws:lambda:us-east-1:000000000000:function:{function_name}"
    headers["x-amzn-lambda-context"] = json.dumps(
        {
            "request_id": request_id,
            "deadline": int((time.time() + timeout_s) * 1000),
            "invoked_function_arn": arn,
            "env_config": {"function_name": function_name, "memory": 512, "version": "$LATEST"},
        }
    )
    headers.pop("content-length", None)
    headers.pop("host", None)
    return method, target, headers, body


def serve_chat_app() -> tuple[Any, str]:
    """Start the chat app (configured from the environment) on a free loopback port."""
    import uvicorn

    sys.path.insert(0, str(CHAT_DIR))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    config = uvicorn.Config("chat_app:app", log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise SystemExit("the chat app did not start (see the errors above)")
        time.sleep(0.01)
    return server, f"http://127.0.0.1:{sock.getsockname()[1]}"


def invoke_http(event: dict[str, Any], timeout_s: float) -> int:
    import httpx

    server, url = serve_chat_app()
    method, target, headers, body = adapter_request(event, timeout_s=timeout_s)
    try:
        with (
            httpx.Client(timeout=timeout_s + 5) as client,
            client.stream(method, url + target, headers=headers, content=body) as response,
        ):
            print(f"HTTP {response.status_code}", file=sys.stderr)
            for name in ("content-type", "x-request-id"):
                if name in response.headers:
                    print(f"{name}: {response.headers[name]}", file=sys.stderr)
            for chunk in response.iter_raw():
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        return 0 if response.status_code < 500 else 1
    finally:
        server.should_exit = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("event", type=Path, help="a JSON event file, e.g. events/chat.json")
    parser.add_argument("--timeout", type=float, default=300, help="the function's timeout (s)")
    args = parser.parse_args(argv)
    try:
        event = json.loads(args.event.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        print(f"cannot read {args.event}: {exc}", file=sys.stderr)
        return 2
    if is_http_event(event):
        return invoke_http(event, args.timeout)
    if "code" in event:
        return invoke_sandbox(event, args.timeout)
    if is_schedule_input(event):
        return invoke_research_schedule(event, args.timeout)
    if is_sqs_event(event):
        return invoke_research_worker(event, args.timeout)
    print(f"{args.event}: no function here takes this kind of event", file=sys.stderr)
    return 2


class _LocalContext:
    """The one part of the Lambda context the sandbox handler reads."""

    def __init__(self, timeout_s: float) -> None:
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def invoke_sandbox(event: dict[str, Any], timeout_s: float) -> int:
    """Call the sandbox function's handler with the event, as Lambda would."""
    sys.path.insert(0, str(ROOT / "functions" / "sandbox"))
    from sandbox_handler import handler

    result = handler(event, _LocalContext(min(timeout_s, 60)))
    print(json.dumps(result, indent=2))
    return 0


def is_schedule_input(event: dict[str, Any]) -> bool:
    """An EventBridge Scheduler target gets the schedule's input: here, jobs or jobs_s3."""
    return "jobs" in event or "jobs_s3" in event


def is_sqs_event(event: dict[str, Any]) -> bool:
    records = event.get("Records")
    return bool(records) and all(r.get("eventSource") == "aws:sqs" for r in records)


class _ResearchContext(_LocalContext):
    """What Powertools' Logger.inject_lambda_context reads, besides the remaining time."""

    def __init__(self, timeout_s: float, function_name: str) -> None:
        super().__init__(timeout_s)
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        arn = f"arn:aws:lambda:us-east-1:000000000000:function:{function_name}"
        self.invoked_function_arn = arn
        self.aws_request_id = str(uuid.uuid4())


def invoke_research_schedule(event: dict[str, Any], timeout_s: float) -> int:
    """The planner; without AGENTLOOP_RESEARCH_QUEUE_URL it prints the messages it would send."""
    sys.path.insert(0, str(ROOT / "functions" / "research"))
    from research_handlers import schedule_handler

    result = schedule_handler(event, _ResearchContext(min(timeout_s, 60), "agentloop-planner"))
    print(json.dumps(result, indent=2))
    return 0


def invoke_research_worker(event: dict[str, Any], timeout_s: float) -> int:
    """The worker; without AGENTLOOP_IDEMPOTENCY_TABLE it runs every message (no dedup)."""
    sys.path.insert(0, str(ROOT / "functions" / "research"))
    from research_handlers import worker_handler

    result = worker_handler(event, _ResearchContext(min(timeout_s, 900), "agentloop-worker"))
    print(json.dumps(result, indent=2))
    # stderr, like the logs: stdout stays the handler's answer alone.
    print("results (report.md and transcript.json, or failure.json):", file=sys.stderr)
    for line in results_locations(event):
        print(f"  {line}", file=sys.stderr)
    return 1 if result.get("batchItemFailures") else 0


def results_locations(event: dict[str, Any]) -> list[str]:
    """Each job of the batch and its results folder: AGENTLOOP_RESULTS_DIR's or the bucket's."""
    from agentloop.research.jobs import JobMessage
    from agentloop.research.store import store_from_env

    store = store_from_env()
    lines = []
    for record in event["Records"]:
        try:
            message = JobMessage.model_validate_json(record.get("body") or "")
        except ValueError:
            lines.append(f"message {record.get('messageId')}: not a job (nothing written)")
            continue
        lines.append(f"{message.job.id}: {store.location(message.prefix.rstrip('/'))}/")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
