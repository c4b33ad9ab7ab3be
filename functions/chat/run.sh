#!/bin/sh
# Lambda entry point of the chat function (template.yaml: Handler: run.sh).
# With AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap, Lambda Web Adapter (a layer) starts first and runs
# this script in place of the Python runtime; it waits until GET /healthz answers on PORT, then
# forwards each Function URL request to uvicorn as plain HTTP and streams the response back.
# The working directory is the function code (/var/task). The runtime would put the layers
# (/opt/python) and its own directory on sys.path for a handler; a script must add them itself.
export PYTHONPATH="/opt/python:${LAMBDA_RUNTIME_DIR:-/var/runtime}${PYTHONPATH:+:$PYTHONPATH}"
# No access log: the app logs one line per run, and a request line could carry a token in its
# query string (the app strips those too; tests/integration/test_access_log.py runs this script).
exec python3 -m uvicorn --host 127.0.0.1 --port "${PORT:-8080}" --no-access-log chat_app:app
