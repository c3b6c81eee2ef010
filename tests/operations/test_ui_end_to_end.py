"""`make ui` for real: `dagster dev` on 127.0.0.1 with a fresh DAGSTER_HOME and a free port; a
materialization launched through its GraphQL API; the asset metadata read back; the server
stopped by its process group."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.operations.conftest import group_members, head_of_sample, stop_group

LAUNCH = """
mutation($selector: JobOrPipelineSelector!) {
  launchRun(executionParams: {selector: $selector, mode: "default"}) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""
REPOSITORIES = "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"
RUN = 'query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }'
METADATA = """
query($path: [String!]!) { assetOrError(assetKey: {path: $path}) { ... on Asset {
  assetMaterializations(limit: 1) { runId metadataEntries { label
    ... on IntMetadataEntry { intValue } ... on TextMetadataEntry { text } } } } } }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", method="POST",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.load(response)
    assert "errors" not in body, body["errors"]
    return body["data"]


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket in LISTEN state on `port`, from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in handle.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


def _wait(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")


@pytest.mark.slow
def test_make_ui_serves_graphql_on_localhost_and_materializes(env):
    head_of_sample(env.traces, "AzureLLMInferenceTrace_code.csv", 120)
    port = _free_port()
    log = open(env.home / "dagster-dev.log", "w")
    server = env.start(["make", "--no-print-directory", "ui", f"UI_PORT={port}"],
                       stdout=log, stderr=subprocess.STDOUT)
    try:
        def answers():
            try:
                return _graphql(port, REPOSITORIES)["repositoriesOrError"]["nodes"]
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert server.poll() is None, (env.home / "dagster-dev.log").read_text()[-3000:]
                return None

        [repository] = _wait(answers, 300, "dagster dev to answer GraphQL")
        assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1, and nothing else

        selector = {"repositoryLocationName": repository["location"]["name"],
                    "repositoryName": repository["name"], "jobName": "nightly"}
        launched = _graphql(port, LAUNCH, {"selector": selector})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]

        def finished():
            status = _graphql(port, RUN, {"id": run_id})["runOrError"]["status"]
            return status if status in ("SUCCESS", "FAILURE", "CANCELED") else None

        assert _wait(finished, 300, "the run to finish") == "SUCCESS"
        asset = _graphql(port, METADATA, {"path": ["requests"]})["assetOrError"]
        [materialization] = asset["assetMaterializations"]
        entries = {e["label"]: e.get("intValue", e.get("text")) for e in materialization["metadataEntries"]}
        assert materialization["runId"] == run_id
        assert entries["dagster/row_count"] == 120 and entries["table"] == "requests"
        assert env.warehouse.is_file()
    finally:
        stop_group(server)
        log.close()
    assert group_members(server.pid) == []  # webserver, daemon and code server all stopped
