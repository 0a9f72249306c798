#!/usr/bin/env python3
"""Local stand-in for the model APIs that coding agents call.

It lets Claude Code, Codex and OpenCode run on this machine without their real backends, so that
their terminal behaviour can be recorded (see scripts/record-agent.py and
tests/data/agents/README.md). It serves, on one loopback port:

  POST /v1/messages            Anthropic Messages API, streaming (SSE) or not   -> Claude Code
  POST /v1/messages/count_tokens                                                 -> Claude Code
  POST /v1/responses           OpenAI Responses API, streaming (SSE)             -> Codex
  POST /v1/chat/completions    OpenAI Chat Completions, streaming or not         -> OpenCode
  GET  /v1/models              a one-model list

What it answers is scripted by words in the latest user message (case-sensitive; plain words,
because "@", "/", "!" and "#" mean something in the agents' input boxes):

  DESK_TOOL     ask to run a shell command (--tool-cmd), so the agent asks for approval; once
                the tool result comes back, reply with plain text
  DESK_TOOL_FILE=NAME  with DESK_TOOL: the command is `touch NAME` instead (another dialog)
  DESK_WRITE    ask to write a file (desk-note.txt), also an approval in most agents
  DESK_ASK      ask the operator a multiple-choice question (Claude's AskUserQuestion, OpenCode's
                question, Codex's request_user_input when offered); else plain text
  DESK_SLOW     reply after --slow seconds instead of --delay
  DESK_DELAY=N  reply after N seconds (float)
  otherwise     reply with plain text, streamed in small pieces over --delay seconds
A token like TOKEN-abc in the prompt is echoed in the reply ("Reply to: TOKEN-abc"), so a test
can tell which prompt a reply belongs to.

Every request is appended to --log as one JSON line (time, path, model, the directive chosen, the
first characters of the user text, the tool names offered, every TOKEN-word anywhere in the
request, earlier turns included); --dump DIR also keeps whole request
bodies, for studying what an agent sends. Nothing here leaves the loopback interface.
"""

import argparse
import itertools
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOG_LOCK = threading.Lock()
COUNTER = itertools.count(1)
DEFAULT_TOOL_CMD = "touch desk-approved.txt"
# The command this request's DESK_TOOL asks to run (each request is served on its own thread).
REQUEST = threading.local()


def tool_cmd():
    return getattr(REQUEST, "tool_cmd", None) or ARGS.tool_cmd


def log(entry):
    entry = {"t": round(time.time(), 3), **entry}
    line = json.dumps(entry, ensure_ascii=False)
    with LOG_LOCK:
        if ARGS.log:
            with open(ARGS.log, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        if not ARGS.quiet:
            print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Deciding what to answer
# ---------------------------------------------------------------------------------------------

def plan(user_text, after_tool, tools):
    """Return (kind, delay_seconds, reply_text). kind: text | tool | write | ask."""
    delay = ARGS.delay
    m = re.search(r"DESK_DELAY=([0-9.]+)", user_text or "")
    if m:
        delay = float(m.group(1))
    elif "DESK_SLOW" in (user_text or ""):
        delay = ARGS.slow
    text = user_text or ""
    m = re.search(r"DESK_TOOL_FILE=([A-Za-z0-9._-]+)", text)
    REQUEST.tool_cmd = f"touch {m.group(1)}" if m else None
    if after_tool:
        return "text", min(delay, 1.0), "The tool ran. Done."
    if "DESK_TOOL" in text and tools:
        return "tool", min(delay, 1.0), None
    if "DESK_WRITE" in text and tools:
        return "write", min(delay, 1.0), None
    if "DESK_ASK" in text and tools:
        return "ask", min(delay, 1.0), None
    first = " ".join(text.split())[:60]
    token = re.search(r"\b(TOKEN-[A-Za-z0-9-]+)\b", text)
    reply = "Reply to: " + (token.group(1) if token else first)
    return "text", delay, reply


def chunks_of(text, n):
    """Split text into about n pieces (at least one)."""
    n = max(1, min(n, len(text)))
    size = -(-len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def find_tool(tools, *names):
    lower = {t.lower(): t for t in tools}
    for n in names:
        if n.lower() in lower:
            return lower[n.lower()]
    return None


def tokens_in(body):
    """Every TOKEN-word anywhere in a request (earlier turns included), sorted: what a resumed
    conversation's request carries of the turns before it."""
    return sorted(set(re.findall(r"TOKEN-[A-Za-z0-9]+", json.dumps(body, ensure_ascii=False))))


def user_fields(text):
    """What the log says of a request's user text: its start, length and end, and with --log-text
    the whole text (so a check can tell that a prompt arrived whole)."""
    fields = {"user": text[:160], "user_len": len(text), "user_tail": text[-40:]}
    if ARGS.log_text:
        fields["text"] = text
    return fields


# ---------------------------------------------------------------------------------------------
# Anthropic Messages API
# ---------------------------------------------------------------------------------------------

def anthropic_user_text(body):
    msgs = body.get("messages") or []
    for msg in reversed(msgs):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content, False
        texts, after_tool = [], False
        for block in content or []:
            if block.get("type") == "tool_result":
                after_tool = True
            elif block.get("type") == "text":
                t = block.get("text", "")
                if not t.lstrip().startswith("<system-reminder>"):
                    texts.append(t)
        text = "\n".join(texts)
        # A refused tool's result travels with the next prompt ("[Request interrupted by user
        # for tool use]" then the prompt): that prompt's directive is what to answer.
        if after_tool and re.search(r"\bDESK_(TOOL|WRITE|ASK)\b", text):
            after_tool = False
        return text, after_tool
    return "", False


def anthropic_tool_block(kind, tools):
    if kind == "tool":
        name = find_tool(tools, "Bash") or tools[0]
        return name, {"command": tool_cmd(), "description": "Create a marker file"}
    if kind == "write":
        name = find_tool(tools, "Write") or tools[0]
        return name, {"file_path": os.path.join(os.getcwd() if ARGS.write_dir is None else ARGS.write_dir,
                                                "desk-note.txt"),
                      "content": "written by the fake model\n"}
    name = find_tool(tools, "AskUserQuestion")
    if name:
        return name, {"questions": [{
            "question": "Which colour should the button be?",
            "header": "Colour",
            "multiSelect": False,
            "options": [
                {"label": "Blue", "description": "The default colour"},
                {"label": "Green", "description": "A calmer colour"},
            ],
        }]}
    return None, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model-api/1"

    def log_message(self, fmt, *args):  # quiet default access log
        pass

    # -- plumbing ------------------------------------------------------------------------------

    def log(self, entry):
        log({"req": self.req_id, **entry})

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Content-Encoding", "") == "zstd":
            return None, raw
        try:
            return json.loads(raw or b"{}"), raw
        except ValueError:
            return None, raw

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, event, data):
        out = ""
        if event:
            out += "event: " + event + "\n"
        out += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        self.wfile.write(out.encode())
        self.wfile.flush()

    def dump(self, raw):
        if ARGS.dump:
            os.makedirs(ARGS.dump, exist_ok=True)
            n = next(COUNTER)
            name = "%04d-%s.json" % (n, self.path.strip("/").replace("/", "_"))
            with open(os.path.join(ARGS.dump, name), "wb") as f:
                f.write(raw)

    # -- routes --------------------------------------------------------------------------------

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        path = self.path.split("?")[0]
        log({"method": "GET", "path": self.path})
        if path.endswith("/models"):
            self.send_json({"object": "list", "data": [
                {"id": ARGS.model, "object": "model", "created": 0, "owned_by": "fake",
                 "type": "model", "display_name": "Fake Model", "created_at": "2025-01-01T00:00:00Z"}],
                "models": [], "has_more": False, "first_id": ARGS.model, "last_id": ARGS.model})
        else:
            self.send_json({"error": {"type": "not_found", "message": "fake-model-api: no " + path}}, 404)

    def do_POST(self):
        self.req_id = next(COUNTER)
        path = self.path.split("?")[0]
        body, raw = self.read_body()
        self.dump(raw)
        if body is None:
            log({"method": "POST", "path": self.path, "error": "unreadable body",
                 "encoding": self.headers.get("Content-Encoding")})
            self.send_json({"error": {"type": "invalid_request_error", "message": "unreadable body"}}, 400)
            return
        try:
            if path.endswith("/messages/count_tokens"):
                log({"method": "POST", "path": self.path})
                self.send_json({"input_tokens": 100})
            elif path.endswith("/messages"):
                self.anthropic(body)
            elif path.endswith("/responses"):
                self.openai_responses(body)
            elif path.endswith("/chat/completions"):
                self.chat(body)
            else:
                log({"method": "POST", "path": self.path, "error": "unknown path"})
                self.send_json({"error": {"type": "not_found", "message": "fake-model-api: no " + path}}, 404)
        except (BrokenPipeError, ConnectionResetError):
            self.log({"path": self.path, "error": "client went away"})
        else:
            self.log({"path": self.path, "done": True})

    # -- Anthropic ----------------------------------------------------------------------------

    def anthropic(self, body):
        tools = [t.get("name") for t in body.get("tools") or [] if t.get("name")]
        text, after_tool = anthropic_user_text(body)
        kind, delay, reply = plan(text, after_tool, tools)
        tool_name, tool_input = (None, None)
        if kind in ("tool", "write", "ask"):
            tool_name, tool_input = anthropic_tool_block(kind, tools)
            if tool_name is None:
                kind, reply = "text", "No question tool offered."
        model = body.get("model", ARGS.model)
        self.log({"tokens": tokens_in(body), "api": "anthropic", "path": self.path, "model": model, "stream": bool(body.get("stream")),
             "kind": kind, "delay": delay, "after_tool": after_tool, **user_fields(text),
             "tools": len(tools), "max_tokens": body.get("max_tokens")})
        msg_id = "msg_fake%06d" % next(COUNTER)
        usage = {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if kind == "text":
            content = [{"type": "text", "text": reply}]
            stop = "end_turn"
        else:
            content = [{"type": "tool_use", "id": "toolu_fake%06d" % next(COUNTER), "name": tool_name,
                        "input": tool_input}]
            stop = "tool_use"
        if not body.get("stream"):
            time.sleep(min(delay, 2.0))
            self.send_json({"id": msg_id, "type": "message", "role": "assistant", "model": model,
                            "content": content, "stop_reason": stop, "stop_sequence": None,
                            "usage": usage})
            return
        self.start_sse()
        self.sse("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}})
        self.sse("ping", {"type": "ping"})
        block = content[0]
        if block["type"] == "text":
            self.sse("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}})
            pieces = chunks_of(reply, max(1, int(delay * 4)))
            for piece in pieces:
                time.sleep(delay / len(pieces))
                self.sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                 "delta": {"type": "text_delta", "text": piece}})
        else:
            time.sleep(delay)
            self.sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            self.sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        self.sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        self.sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 20}})
        self.sse("message_stop", {"type": "message_stop"})

    # -- OpenAI Responses (Codex) -------------------------------------------------------------

    def openai_responses(self, body):
        tools = []
        for t in body.get("tools") or []:
            tools.append(t.get("name") or t.get("type"))
        items = body.get("input") or []
        after_tool, text = False, ""
        if items:
            last = items[-1]
            if last.get("type") in ("function_call_output", "custom_tool_call_output",
                                    "local_shell_call_output"):
                after_tool = True
        for item in reversed(items):
            if item.get("type") == "message" and item.get("role") == "user":
                parts = item.get("content") or []
                if isinstance(parts, str):
                    text = parts
                else:
                    text = "\n".join(p.get("text", "") for p in parts if p.get("type") in ("input_text", "text"))
                if not text.lstrip().startswith("<"):
                    break
        kind, delay, reply = plan(text, after_tool, tools)
        call = None
        if kind == "tool":
            name = find_tool(tools, "exec_command", "shell_command", "shell", "local_shell")
            if name == "exec_command":
                # asking for escalation is what makes Codex ask the operator under its default
                # (on-request) approval policy; a sandboxed command would just run
                call = (name, {"cmd": tool_cmd(), "sandbox_permissions": "require_escalated",
                               "justification": "May I create a marker file for the test?"})
            elif name == "shell_command":
                call = (name, {"command": tool_cmd()})
            elif name:
                call = (name, {"command": ["bash", "-lc", tool_cmd()]})
        elif kind == "write":
            name = find_tool(tools, "apply_patch")
            if name:
                call = (name, {"input": "*** Begin Patch\n*** Add File: desk-note.txt\n+written by the fake model\n*** End Patch\n"})
        elif kind == "ask":
            name = find_tool(tools, "request_user_input")
            if name:
                call = (name, {"questions": [{"id": "colour", "header": "Colour",
                                              "question": "Which colour should the button be?",
                                              "options": [{"label": "Blue", "description": "The default colour"},
                                                          {"label": "Green", "description": "A calmer colour"}]}]})
        if kind != "text" and call is None:
            kind, reply = "text", "No suitable tool offered."
        model = body.get("model", ARGS.model)
        self.log({"tokens": tokens_in(body), "api": "responses", "path": self.path, "model": model, "stream": bool(body.get("stream")),
             "kind": kind, "delay": delay, "after_tool": after_tool, **user_fields(text), "tools": tools})
        rid = "resp_fake%06d" % next(COUNTER)
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120}
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
                "status": "in_progress", "output": []}
        self.start_sse()
        self.sse("response.created", {"type": "response.created", "response": base})
        self.sse("response.in_progress", {"type": "response.in_progress", "response": base})
        if kind == "text":
            mid = "msg_fake%06d" % next(COUNTER)
            item = {"type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": []}
            self.sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item})
            self.sse("response.content_part.added", {"type": "response.content_part.added", "item_id": mid,
                                                     "output_index": 0, "content_index": 0,
                                                     "part": {"type": "output_text", "text": "", "annotations": []}})
            pieces = chunks_of(reply, max(1, int(delay * 4)))
            for piece in pieces:
                time.sleep(delay / len(pieces))
                self.sse("response.output_text.delta", {"type": "response.output_text.delta", "item_id": mid,
                                                        "output_index": 0, "content_index": 0, "delta": piece})
            done_item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                         "content": [{"type": "output_text", "text": reply, "annotations": []}]}
            self.sse("response.output_text.done", {"type": "response.output_text.done", "item_id": mid,
                                                   "output_index": 0, "content_index": 0, "text": reply})
        else:
            time.sleep(delay)
            name, args = call
            cid = "call_fake%06d" % next(COUNTER)
            done_item = {"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": name,
                         "arguments": json.dumps(args), "status": "completed"}
            self.sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                    "item": {**done_item, "arguments": "", "status": "in_progress"}})
        self.sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": done_item})
        self.sse("response.completed", {"type": "response.completed", "response": {
            **base, "status": "completed", "output": [done_item], "usage": usage}})

    # -- OpenAI Chat Completions (OpenCode) ---------------------------------------------------

    def chat(self, body):
        tools = [(t.get("function") or {}).get("name") for t in body.get("tools") or []]
        msgs = body.get("messages") or []
        after_tool = bool(msgs) and msgs[-1].get("role") == "tool"
        text = ""
        for msg in reversed(msgs):
            if msg.get("role") == "user":
                c = msg.get("content")
                text = c if isinstance(c, str) else "\n".join(
                    p.get("text", "") for p in c or [] if p.get("type") == "text")
                break
        kind, delay, reply = plan(text, after_tool, tools)
        call = None
        if kind == "tool":
            name = find_tool(tools, "bash")
            if name:
                call = (name, {"command": tool_cmd(), "description": "Create a marker file"})
        elif kind == "write":
            name = find_tool(tools, "write")
            if name:
                call = (name, {"filePath": os.path.join(os.getcwd() if ARGS.write_dir is None else ARGS.write_dir,
                                                        "desk-note.txt"),
                               "content": "written by the fake model\n"})
        elif kind == "ask":
            name = find_tool(tools, "question")
            if name:
                call = (name, {"questions": [{"question": "Which colour should the button be?", "header": "Colour",
                                              "options": [{"label": "Blue", "description": "The default colour"},
                                                          {"label": "Green", "description": "A calmer colour"}]}]})
        if kind != "text" and call is None:
            kind, reply = "text", "No suitable tool offered."
        model = body.get("model", ARGS.model)
        self.log({"tokens": tokens_in(body), "api": "chat", "path": self.path, "model": model, "stream": bool(body.get("stream")),
             "kind": kind, "delay": delay, "after_tool": after_tool, **user_fields(text), "tools": tools})
        cid = "chatcmpl-fake%06d" % next(COUNTER)
        created = int(time.time())
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        if not body.get("stream"):
            time.sleep(min(delay, 2.0))
            message = {"role": "assistant", "content": reply if kind == "text" else None}
            finish = "stop"
            if kind != "text":
                message["tool_calls"] = [{"id": "call_1", "type": "function",
                                          "function": {"name": call[0], "arguments": json.dumps(call[1])}}]
                finish = "tool_calls"
            self.send_json({"id": cid, "object": "chat.completion", "created": created, "model": model,
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})
            return

        def chunk(delta, finish=None, with_usage=False):
            obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if with_usage:
                obj["usage"] = usage
            self.sse(None, obj)

        self.start_sse()
        chunk({"role": "assistant", "content": ""})
        if kind == "text":
            pieces = chunks_of(reply, max(1, int(delay * 4)))
            for piece in pieces:
                time.sleep(delay / len(pieces))
                chunk({"content": piece})
            chunk({}, "stop", True)
        else:
            time.sleep(delay)
            chunk({"tool_calls": [{"index": 0, "id": "call_fake%06d" % next(COUNTER), "type": "function",
                                   "function": {"name": call[0], "arguments": json.dumps(call[1])}}]})
            chunk({}, "tool_calls", True)
        self.sse(None, "[DONE]")


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks one)")
    p.add_argument("--port-file", help="write the port actually used to this file")
    p.add_argument("--delay", type=float, default=3.0, help="seconds a plain reply takes (default 3)")
    p.add_argument("--slow", type=float, default=10.0, help="seconds a DESK_SLOW reply takes (default 10)")
    p.add_argument("--model", default="fake-model", help="model id to report (default fake-model)")
    p.add_argument("--tool-cmd", default=DEFAULT_TOOL_CMD, help="shell command for DESK_TOOL (default: %(default)s)")
    p.add_argument("--write-dir", help="directory for DESK_WRITE's file (default: the server's cwd)")
    p.add_argument("--log", help="append one JSON line per request to this file")
    p.add_argument("--dump", help="keep every request body in this directory")
    p.add_argument("--log-text", action="store_true", help="log each request's whole user text too")
    p.add_argument("--quiet", action="store_true", help="do not echo the log to stderr")
    ARGS = p.parse_args()
    server = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file, "w") as f:
            f.write(str(port))
    print("fake-model-api listening on http://%s:%d" % (ARGS.host, port), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
