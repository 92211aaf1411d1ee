#!/usr/bin/env python3
"""Drives an mcpspec server with the official MCP Python SDK (PyPI `mcp` 2.x), as a user would.

Usage: client.py --era legacy|2026-07-28 --suite conformance|pm (--url URL | -- CMD [ARGS...])

Connects in the given protocol era (`legacy` is the 2025-11-25 initialize handshake), runs the
suite's checks through the SDK's public API and prints one line per check: `ok NAME` or
`FAIL NAME: why`. Exit status 0 when every check passed, 1 otherwise, 2 on a usage error.
The checks are the same as client.mjs's, so the two SDKs are held to one behaviour.
"""
import argparse
import asyncio
import sys
import traceback
import warnings

from mcp import Client, MCPDeprecationWarning, MCPError, StdioServerParameters, types

# logging/setLevel is how a 2025-11-25 client asks for log messages; the SDK warns that
# 2026-07-28 deprecates it, which is why the modern era here sends the level in `_meta`.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

FAILED = []


def check(name, ok, why=""):
    print(f"ok {name}" if ok else f"FAIL {name}: {why}", flush=True)
    if not ok:
        FAILED.append(name)


def text(result):
    """The text of the first content block of a tool result."""
    block = result.content[0] if result.content else None
    return getattr(block, "text", "")


class Person:
    """The person behind the client: answers forms by their fields, accepts or declines."""

    def __init__(self):
        self.action = "accept"
        self.asked = []

    async def elicit(self, _context, params):
        self.asked.append(params.message)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)
        fields = {"name": "Ada", "context": "from the Python SDK"}
        props = (params.requested_schema or {}).get("properties", {})
        return types.ElicitResult(action="accept", content={k: fields.get(k, "yes") for k in props})

    async def sample(self, _context, _params):
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="e2e"
        )


async def conformance(client, person, era, logs):
    names = {t.name for t in (await client.list_tools()).tools}
    wanted = {"test_simple_text", "test_input_required_result_elicitation", "json_schema_2020_12_tool"}
    check("tools/list", wanted <= names, f"missing {sorted(wanted - names)}")
    r = await client.call_tool("test_simple_text", {})
    check("tools/call content", text(r) == "This is a simple text response for testing.", text(r))
    r = await client.call_tool("test_input_required_result_elicitation", {})
    check("a handler's question", text(r) == "Hello, Ada!", text(r))
    r = await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
    check("sampling", text(r) == "LLM response: Paris", text(r))
    p = await client.get_prompt("test_input_required_result_prompt")
    said = p.messages[0].content.text
    check("a prompt's question", said == "Use this context: from the Python SDK", said)
    person.action = "decline"
    p = await client.get_prompt("test_input_required_result_prompt")
    person.action = "accept"
    said = p.messages[0].content.text
    check("a prompt's question declined", said == "No context was given.", said)
    p = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
    said = p.messages[0].content.text
    check("prompt arguments", said == "Prompt with arguments: arg1='a', arg2='b'", said)
    r = await client.read_resource("test://static-text")
    check("resources/read", "static" in r.contents[0].text.lower(), r.contents[0].text)
    r = await client.call_tool("json_schema_2020_12_tool", {"name": "x"})
    check("invalid arguments are a tool error", r.is_error and "email" in text(r), text(r))
    try:
        await client.call_tool("no_such_tool", {})
        check("an unknown tool is a protocol error", False, "no error")
    except MCPError as e:
        check("an unknown tool is a protocol error", e.error.code == -32602, str(e.error))
    if era == "legacy":
        await client.set_logging_level("info")
    r = await client.call_tool("test_logging_tool", {})
    # Over Streamable HTTP rmcp sends a 2025-11-25 session's log messages on the standalone
    # GET stream, not on the stream of the call that logged them: they may come after its
    # answer, so wait for them (at most 5 s).
    try:
        await asyncio.wait_for(logs.arrived(3), 5)
    except TimeoutError:
        pass
    seen = [m.data for m in logs]
    check("logging", seen == ["logging started", "logging going on", "logging done"], seen)


async def pm(client, person, _era, _logs):
    r = await client.call_tool("db.create", {"database": "scratch"})
    check("db.create", not r.is_error, text(r))
    person.action = "decline"
    r = await client.call_tool("db.drop", {"database": "scratch", "confirm": True})
    check("a declined confirmation changes nothing", r.is_error and "declined" in text(r), text(r))
    listed = text(await client.call_tool("db.list", {}))
    check("the database is still there", "scratch" in listed, listed)
    person.action = "accept"
    r = await client.call_tool("db.drop", {"database": "scratch", "confirm": True})
    check("an accepted confirmation goes on", not r.is_error, text(r))
    check("the person was asked each time", len(person.asked) == 2, person.asked)


class Logs(list):
    """The log messages received, which a check can wait for."""

    def __init__(self):
        super().__init__()
        self.changed = asyncio.Condition()

    async def add(self, params):
        async with self.changed:
            self.append(params)
            self.changed.notify_all()

    async def arrived(self, n):
        async with self.changed:
            await self.changed.wait_for(lambda: len(self) >= n)


async def run(ns, server):
    person, logs = Person(), Logs()

    async def log(params):
        await logs.add(params)

    async with Client(
        server,
        mode=ns.era,
        elicitation_callback=person.elicit,
        sampling_callback=person.sample,
        logging_callback=log,
        log_level="info" if ns.era != "legacy" else None,
    ) as client:
        want = "2025-11-25" if ns.era == "legacy" else ns.era
        check("protocol version", client.protocol_version == want, client.protocol_version)
        await {"conformance": conformance, "pm": pm}[ns.suite](client, person, ns.era, logs)


def main():
    argv = sys.argv[1:]
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser()
    ap.add_argument("--era", required=True, choices=["legacy", "2026-07-28"])
    ap.add_argument("--suite", required=True, choices=["conformance", "pm"])
    ap.add_argument("--url")
    ns = ap.parse_args(own)
    if bool(ns.url) == bool(cmd):
        ap.error("give either --url or a server command after --")
    server = ns.url or StdioServerParameters(command=cmd[0], args=cmd[1:])
    try:
        asyncio.run(run(ns, server))
    except Exception:  # noqa: BLE001 - any failure of the SDK or the server is a failed run
        check("the run", False, traceback.format_exc())
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
