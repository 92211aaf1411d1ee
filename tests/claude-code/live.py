"""Claude Code's own calls on the workbench, live (issue 60's "done when").

Claude Code (`claude -p`, the pinned CLI of this directory) runs one turn against a scripted
model on 127.0.0.1, the only part that is not the real thing: this machine has no model. The
model answers the first request with a call of the studio server's `get_learning` (the tool
as Claude Code itself named and listed it to the model), and the second, which carries the
tool's result, with a line of text. Claude Code starts the server from its own registration
(`claude mcp add ... --ui 127.0.0.1:PORT`) and makes the call over the server's stdio; the
workbench's live stream (`GET /ui/events`), opened once the server is up, must show that call
(client Claude Code, tool get_learning, outcome ok) before the model answers its result. No
sleep: the model's second answer waits for the stream, at most 10 s.

    python3 live.py CLAUDE -- MCPSPEC serve studio --db DB --read-only --ui {ui}
    python3 live.py CLAUDE -- MCPSPEC dev spec/studio.yaml --db DB --ui {ui}
"""

import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLAUDE = sys.argv[1]
SERVER = sys.argv[sys.argv.index("--") + 1:]
TOOL = "mcp__studio__get_learning"
ARGUMENTS = {"id": "L-001"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


UI = free_port()
seen = queue.Queue()  # the workbench's lines for tools/call, as they stream in
problems = []
requests = []


def open_workbench():
    """Opens the workbench's live stream: once its answer has begun, the server counts the
    page as open and keeps the calls made from then on (without --ui-history it keeps none
    while no page is open)."""
    return urllib.request.urlopen(f"http://127.0.0.1:{UI}/ui/events", timeout=30)


def follow_workbench(stream):
    """Reads the workbench's live stream and passes on each call it lists."""
    try:
        with stream as r:
            for raw in r:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    record = json.loads(line[len("data: "):])
                    if record.get("method") == "tools/call":
                        seen.put(record)
    except Exception as e:  # reported by the wait below when no call came
        seen.put({"error": repr(e)})


def opened(seq):
    """One call as the page opens it (`GET /ui/calls/SEQ`): its request and answer."""
    with urllib.request.urlopen(f"http://127.0.0.1:{UI}/ui/calls/{seq}", timeout=10) as r:
        return json.load(r)


def sse(events):
    return "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


def reply(model, block, stop):
    """A streamed Messages API answer made of one content block."""
    start = dict(block)
    delta = None
    if block["type"] == "text":
        start["text"], delta = "", {"type": "text_delta", "text": block["text"]}
    else:
        start["input"], delta = {}, {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    return sse([
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_live", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def tool_results(messages):
    """The tool_result blocks of the conversation's last user message."""
    last = messages[-1] if messages else {}
    content = last.get("content") if isinstance(last.get("content"), list) else []
    return [b for b in content if b.get("type") == "tool_result"]


class Model(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if "count_tokens" in self.path:
            return self.send(b'{"input_tokens": 1}', "application/json")
        requests.append(body)
        results = tool_results(body.get("messages", []))
        if not results:
            names = [t.get("name") for t in body.get("tools", [])]
            if TOOL not in names:
                problems.append(f"Claude Code did not list {TOOL} to the model: {names}")
                block = {"type": "text", "text": "no tool"}
                return self.send(reply(body.get("model", ""), block, "end_turn"))
            # The server is up (its tools are listed): its page is open before the call is
            # asked for, and followed from now on.
            try:
                stream = open_workbench()
            except Exception as e:
                problems.append(f"could not open the workbench's live stream: {e!r}")
                block = {"type": "text", "text": "no page"}
                return self.send(reply(body.get("model", ""), block, "end_turn"))
            threading.Thread(target=follow_workbench, args=(stream,), daemon=True).start()
            block = {"type": "tool_use", "id": "toolu_live", "name": TOOL, "input": ARGUMENTS}
            return self.send(reply(body.get("model", ""), block, "tool_use"))
        # The call was made: the page must have shown it before the model goes on.
        try:
            record = seen.get(timeout=10)
        except queue.Empty:
            record = {"error": "the workbench's live stream showed no tools/call within 10 s"}
        self.server.record = record
        self.server.result = results[0]
        # Opened on the page while the server still runs (Claude Code ends it with the turn).
        if "seq" in record:
            try:
                self.server.detail = opened(record["seq"])
            except Exception as e:
                self.server.detail = {"error": repr(e)}
        self.send(reply(body.get("model", ""), {"type": "text", "text": "done"}, "end_turn"))

    def do_GET(self):
        self.send(b"", "text/plain", 404)

    def send(self, data, kind="text/event-stream", status=200):
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def main():
    model = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    model.record = model.result = model.detail = None
    threading.Thread(target=model.serve_forever, daemon=True).start()
    env = dict(os.environ,
               ANTHROPIC_BASE_URL=f"http://127.0.0.1:{model.server_port}",
               ANTHROPIC_API_KEY="sk-scripted-model",
               DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    server = [a.replace("{ui}", f"127.0.0.1:{UI}") for a in SERVER]
    subprocess.run([CLAUDE, "mcp", "add", "studio", "--", *server], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    turn = subprocess.run([CLAUDE, "-p", "What does learning L-001 say?", "--allowedTools", TOOL],
                          env=env, capture_output=True, text=True, timeout=120)
    subprocess.run([CLAUDE, "mcp", "remove", "studio"], env=env, stdout=subprocess.DEVNULL)
    record, result = model.record, model.result
    print(f"claude -p: exit {turn.returncode}, answered {turn.stdout.strip()!r}")
    print(f"the workbench's live line: {json.dumps(record)}")
    if turn.returncode != 0:
        problems.append(f"claude -p failed: {turn.stderr.strip()[-2000:]}")
    if record is None:
        problems.append(f"Claude Code never sent the tool's result to the model ({len(requests)} requests)")
    else:
        expected = {"tool": "get_learning", "outcome": "ok"}
        wrong = {k: record.get(k) for k in expected if record.get(k) != expected[k]}
        if wrong or "claude" not in str(record.get("client", "")).lower():
            problems.append(f"the page's line is not Claude Code's call of get_learning: {record}")
        else:
            detail = model.detail or {}
            print(f"the call opened on the page: {json.dumps(detail)[:600]}")
            if detail.get("arguments") != ARGUMENTS:
                problems.append(f"the page shows other arguments than Claude Code sent: {detail}")
            if "Use WAL" not in json.dumps(detail.get("response")):
                problems.append(f"the page does not show the call's answer: {detail}")
        if "Use WAL" not in json.dumps(result):
            problems.append(f"the tool's result Claude Code passed on is not the learning: {result}")
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
