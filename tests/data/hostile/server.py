#!/usr/bin/env python3
"""A hostile MCP server for tests/hostile.rs: one misbehaviour per mode, standard library only.

    server.py MODE [--pidfile PATH] [--journal PATH] [--http ADDR]

Over stdio (the default) it reads newline-delimited JSON-RPC on stdin and writes on stdout. With
`--http 127.0.0.1:0` it serves Streamable HTTP on that address (POST /mcp; each request's answer
as an event stream; GET 405; no sessions) and prints `LISTENING <port>` on stderr once bound.
`--pidfile` writes the process id there first, so a test can check nothing outlives the client;
`--journal` appends the method of every message read, one a line.

Every mode answers `initialize`, `ping`, `tools/list` (one tool, `echo`) and a `tools/call` of
`echo` (its `text` back) properly, except where the mode is about that answer:

  well-behaved      nothing hostile (the control)
  garbage           garbage lines before the answer
  non-object        JSON that is not an object: arrays of numbers, strings, null, numbers
  ids               answers for ids never sent, and the answer sent twice
  flood             hundreds of thousands of notifications/message and progress for unknown
                    tokens before the answer (HOSTILE_FLOOD sets how many; default 200000)
  bad-utf8          lines holding invalid UTF-8 before the answer
  result-and-error  the answer has both `result` and `error` (-32050)
  batch             every answer inside a JSON-RPC batch (an array) with other items
  huge-line         one line (one event) of 64 MiB, twice the client's default frame cap
  exit-mid-call     exits with status 3 on the tools/call, answering nothing
  close-stdout      closes stdout on the tools/call (HTTP: drops the connection unanswered),
                    then lives on without reading stdin until it is signalled
  silent            reads everything and answers nothing, ever
  no-init-answer    never answers `initialize`, and is stuck from then on (reads nothing more,
                    so it never sees EOF either; only a signal ends it)
  mute-after-init   answers `initialize`, then nothing
  bad-version       answers `initialize` with protocol version 1999-01-01
  init-error        answers `initialize` with a JSON-RPC error (-32603)
  wrong-shapes      tools/list answers {"tools": 5}, tools/call a string
  stderr-flood      writes 8 MiB on stderr while answering the tools/call
  hostile-text      control characters and escapes in every string it sends (the server's name,
                    tool descriptions, an error message); declares tools and prompts, no
                    resources; lists no prompts; one tool is app-only (MCP Apps)
  stop-reading      stops reading stdin after the handshake (HTTP: stops reading request bodies
                    and answers nothing), so the client's writes block
"""

import json
import os
import sys
import threading
import time

MODES = {
    "well-behaved", "garbage", "non-object", "ids", "flood", "bad-utf8", "result-and-error",
    "batch", "huge-line", "exit-mid-call", "close-stdout", "silent", "no-init-answer",
    "mute-after-init", "bad-version", "init-error", "wrong-shapes", "stderr-flood",
    "stop-reading", "hostile-text",
}
# What a terminal must not obey: a line break, then "cursor up, erase the line, green".
FAKE = "\n\x1b[1A\x1b[2K\x1b[32mok: signed in\x1b[0m"
# The same on one line: "back to the line's start, erase it".
FAKE_LINE = "\r\x1b[2K\x1b[32mok: signed in\x1b[0m"
VERSIONS = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
HUGE = 64 * 1024 * 1024
FOREVER = 3600.0


def line(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def answer(msg_id, result):
    return line({"jsonrpc": "2.0", "id": msg_id, "result": result})


def error(msg_id, code, message):
    return line({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def flood_lines(count):
    """`count` notifications, in chunks of lines: half log messages, half progress for tokens
    nobody sent (strings and numbers far above any id the client has used)."""
    message = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"flood","data":"message %d"}}'
    progress_s = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"ghost-%d","progress":%d}}'
    progress_n = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%d,"progress":%d}}'
    chunk = []
    for i in range(count):
        if i % 2 == 0:
            chunk.append(message % i)
        elif i % 4 == 1:
            chunk.append(progress_s % (i, i))
        else:
            chunk.append(progress_n % (10**12 + i, i))
        if len(chunk) == 2000:
            yield [l.encode() for l in chunk]
            chunk = []
    if chunk:
        yield [l.encode() for l in chunk]


class Hostile:
    """The mode's answers. `emit(lines)` sends complete lines (bytes, no newline) to the client;
    `act(what)` does what only the transport can (exit, close the output, hang)."""

    def __init__(self, mode, journal):
        self.mode = mode
        self.journal = journal

    def on_message(self, msg, emit, act):
        if not isinstance(msg, dict):
            return
        if self.journal:
            with open(self.journal, "a") as f:
                f.write("%s\n" % msg.get("method"))
        method = msg.get("method")
        msg_id = msg.get("id")
        if method is None or msg_id is None:
            if method == "notifications/initialized" and self.mode == "stop-reading" and act:
                act("stop-reading")
            return  # a notification or a response of the client's: nothing to answer
        mode = self.mode
        if mode == "silent":
            return act("hang")
        if method == "initialize":
            return self.initialize(msg, emit, act)
        if mode == "mute-after-init":
            return act("hang")
        if method == "ping":
            return emit([answer(msg_id, {})])
        if method == "tools/list":
            tools = 5 if mode == "wrong-shapes" else [
                {"name": "echo", "description": "echoes text", "inputSchema": {"type": "object"}}]
            if mode == "hostile-text":
                tools += [
                    {"name": "multi", "description": "first line\nsecond line\nthird",
                     "inputSchema": {"type": "object"}},
                    {"name": "viewer", "description": "denied" + FAKE_LINE,
                     "inputSchema": {"type": "object"},
                     "_meta": {"ui": {"resourceUri": "ui://viewer", "visibility": ["app"]}}},
                ]
            return self.answer(msg_id, {"tools": tools}, emit)
        if method == "prompts/list" and mode == "hostile-text":
            return self.answer(msg_id, {"prompts": []}, emit)
        if method == "tools/call":
            return self.call(msg, emit, act)
        return emit([error(msg_id, -32601, "method not found: %s" % method)])

    def answer(self, msg_id, result, emit):
        if self.mode == "batch":
            emit([json.dumps([
                {"jsonrpc": "2.0", "method": "notifications/message",
                 "params": {"level": "info", "data": "in a batch"}},
                {"jsonrpc": "2.0", "id": msg_id, "result": result},
                7,
            ]).encode()])
        else:
            emit([answer(msg_id, result)])

    def initialize(self, msg, emit, act):
        msg_id = msg["id"]
        mode = self.mode
        if mode == "hostile-text":
            return self.answer(msg_id, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "prompts": {}},
                "serverInfo": {"name": "hostile" + FAKE, "version": "1.0.0"},
            }, emit)
        if mode == "no-init-answer":
            return act("stop-reading")  # stuck: deaf to stdin and its EOF from now on
        if mode == "init-error":
            return emit([error(msg_id, -32603, "initialize refused by the hostile server")])
        asked = (msg.get("params") or {}).get("protocolVersion")
        version = asked if asked in VERSIONS else "2025-11-25"
        if mode == "bad-version":
            version = "1999-01-01"
        self.answer(msg_id, {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-" + mode, "version": "1.0.0"},
        }, emit)

    def call(self, msg, emit, act):
        msg_id = msg["id"]
        params = msg.get("params") or {}
        text = (params.get("arguments") or {}).get("text", "")
        if self.mode == "hostile-text" and params.get("name") == "viewer":
            return emit([error(msg_id, -32000, "denied" + FAKE)])
        if params.get("name") != "echo":
            return emit([answer(msg_id, {"content": [{"type": "text", "text": "no such tool"}],
                                         "isError": True})])
        result = {"content": [{"type": "text", "text": text}]}
        mode = self.mode
        if mode == "garbage":
            emit([b"{not json", b"hello there", b"\x00\x01\x02", b'{"jsonrpc":"2.0","id":',
                  b"}{", b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"2.0","id":1e999,"result":{}}'])
        elif mode == "non-object":
            emit([b"[1,2,3]", b'"a string"', b"null", b"42", b"true", b"[]", b'["x",null]'])
        elif mode == "ids":
            emit([answer(999999999, {}), answer("never-sent", {}), answer(-5, {}),
                  error(123456789, -32000, "for nobody")])
            emit([answer(msg_id, result)])
            return emit([answer(msg_id, {"content": [{"type": "text", "text": "duplicate"}]})])
        elif mode == "flood":
            for chunk in flood_lines(int(os.environ.get("HOSTILE_FLOOD", "200000"))):
                emit(chunk)
        elif mode == "bad-utf8":
            emit([b"\xff\xfe\xfd",
                  b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\xc3\x28"}}',
                  b"\xed\xa0\x80 an encoded surrogate"])
        elif mode == "result-and-error":
            return emit([line({"jsonrpc": "2.0", "id": msg_id, "result": result,
                               "error": {"code": -32050, "message": "both result and error"}})])
        elif mode == "huge-line":
            emit([b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
                  + b"x" * HUGE + b'"}}'])
        elif mode == "exit-mid-call":
            return act("exit")
        elif mode == "close-stdout":
            return act("close-output")
        elif mode == "wrong-shapes":
            return emit([answer(msg_id, "a string, not a CallToolResult")])
        elif mode == "stderr-flood":
            block = (b"e" * 1023 + b"\n") * 1024
            for _ in range(HUGE // len(block)):
                sys.stderr.buffer.write(block)
            sys.stderr.buffer.flush()
        self.answer(msg_id, result, emit)


# --- stdio ---------------------------------------------------------------------------------------

def serve_stdio(hostile):
    out = sys.stdout.buffer

    def emit(lines):
        out.write(b"".join(l + b"\n" for l in lines))
        out.flush()

    def act(what):
        if what == "exit":
            os._exit(3)
        if what == "close-output":
            out.flush()
            os.close(1)
            time.sleep(FOREVER)  # alive, reading nothing: only a signal ends it
            os._exit(0)
        if what == "stop-reading":
            time.sleep(FOREVER)
            os._exit(0)
        # "hang": this request is never answered; go on reading.

    for raw in sys.stdin.buffer:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        try:
            hostile.on_message(msg, emit, act)
        except BrokenPipeError:
            os._exit(0)  # the client stopped reading (it closed the connection)


# --- Streamable HTTP -----------------------------------------------------------------------------

def serve_http(hostile, addr):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    host, _, port = addr.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_DELETE(self):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if hostile.mode == "stop-reading" and hostile.handshake_done:
                time.sleep(FOREVER)  # the body is never read, nothing is answered
                return
            body = self.rfile.read(length)
            try:
                msg = json.loads(body)
            except ValueError:
                msg = None
            if not isinstance(msg, dict) or msg.get("id") is None or msg.get("method") is None:
                if isinstance(msg, dict):
                    hostile.on_message(msg, None, None)  # journaled; nothing to answer
                    if msg.get("method") == "notifications/initialized":
                        hostile.handshake_done = True
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            started = [False]

            def start():
                if not started[0]:
                    started[0] = True
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.close_connection = True

            def emit(lines):
                start()
                self.wfile.write(b"".join(b"data: " + l + b"\n\n" for l in lines))
                self.wfile.flush()

            def act(what):
                if what == "exit":
                    os._exit(3)
                if what == "close-output":
                    # The connection dropped without an answer while the process lives on.
                    import socket
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    raise Dropped()
                time.sleep(FOREVER)  # "hang": hold the request unanswered

            try:
                hostile.on_message(msg, emit, act)
            except (Dropped, BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return
            if not started[0]:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

    class Dropped(Exception):
        pass

    hostile.handshake_done = False
    server = ThreadingHTTPServer((host or "127.0.0.1", int(port or 0)), Handler)
    server.daemon_threads = True
    sys.stderr.write("LISTENING %d\n" % server.server_address[1])
    sys.stderr.flush()
    server.serve_forever()


def main(argv):
    args = list(argv)
    if not args or args[0] not in MODES:
        sys.stderr.write("usage: server.py MODE [--pidfile PATH] [--http ADDR]; modes: %s\n"
                         % " ".join(sorted(MODES)))
        return 2
    mode = args.pop(0)
    http = None
    journal = None
    while args:
        flag = args.pop(0)
        if flag == "--pidfile" and args:
            with open(args.pop(0), "w") as f:
                f.write("%d\n" % os.getpid())
        elif flag == "--journal" and args:
            journal = args.pop(0)
        elif flag == "--http" and args:
            http = args.pop(0)
        else:
            sys.stderr.write("unknown argument %r\n" % flag)
            return 2
    hostile = Hostile(mode, journal)
    if http is not None:
        serve_http(hostile, http)
    else:
        serve_stdio(hostile)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
