"""The openai-agents Python SDK (agents.realtime) against this server, over WebSocket.

A RealtimeAgent with one function tool, get_weather, is run by a RealtimeRunner connected to
--url with --key. The script sends one user message (text, and with --image a small PNG as an
input_image part of the same message), lets the SDK run the tool when the model calls it, and
waits for the answer that follows the tool's output. What it saw goes to stdout as JSON lines,
one object each with an "event" key, for test/clients/agents-python.test.ts to assert on:

  {"event": "server", "type": ..., "item": {...}, ...}  every server event, in order (items:
                                                       id, type, role, status, name, call_id, arguments)
  {"event": "tool_start", "name": ..., "arguments": ...}  the SDK is about to run the tool
  {"event": "tool_called", "name": ..., "arguments": {...}}  inside the tool itself
  {"event": "tool_end", "name": ..., "output": ...}    the tool's output, sent back by the SDK
  {"event": "transcript", "response_id": ..., "text": ...}  a finished audio transcript or text
  {"event": "error", "error": ...}                     an error event of the session
  {"event": "done", "transcript": ...}                 the answer after the tool's output
  {"event": "no_tool_call", "transcript": ...}         a response without a call came first (exit 3)
  {"event": "tool_loop", "calls": n}                   the model kept calling the tool (exit 4)
  {"event": "timeout", "after_s": ...}                 nothing conclusive in time (exit 1)
  {"event": "ended", "reason": ...}                    the session ended first (exit 2)

Exit status: 0 after "done", 1 on timeout, 2 when the session ended before an answer, 3 when the
model answered without calling the tool, 4 when it called the tool more than MAX_TOOL_CALLS times.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import struct
import sys
import threading
import zlib
from typing import Any

from agents import function_tool, set_tracing_disabled
from agents.realtime import RealtimeAgent, RealtimeRunner

WEATHER = "Sunny, 22 degrees Celsius"
# More calls than this for one question: the model is calling the tool in a loop.
MAX_TOOL_CALLS = 3


_emit_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    # One write per line, under a lock: tools may run in worker threads.
    line = json.dumps({"event": event, **fields}, default=str) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


@function_tool
def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city's name, e.g. Paris.
    """
    emit("tool_called", name="get_weather", arguments={"city": city})
    return f"{WEATHER} in {city}."


def server_event_summary(data: dict[str, Any]) -> dict[str, Any]:
    """A server event's type, and for item events the item's id, type, status and call."""
    summary: dict[str, Any] = {"type": data.get("type")}
    item = data.get("item")
    if isinstance(item, dict):
        summary["item"] = {k: item.get(k) for k in ("id", "type", "role", "status", "name", "call_id", "arguments") if k in item}
        summary["item"]["content_types"] = [c.get("type") for c in item.get("content") or [] if isinstance(c, dict)]
    for key in ("response_id", "item_id", "call_id", "arguments"):
        if key in data:
            summary[key] = data[key]
    if data.get("type") == "error":
        summary["error"] = data.get("error")
    return summary


def tiny_png(width: int = 16, height: int = 16) -> bytes:
    """A small RGB PNG (a red-to-blue gradient), made without an imaging library."""
    rows = b"".join(
        b"\x00" + b"".join(bytes((255 - x * 255 // (width - 1), 64, x * 255 // (width - 1))) for x in range(width))
        for _ in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


async def run(args: argparse.Namespace) -> int:
    # The SDK's own trace export goes to api.openai.com; the session's "tracing" setting, which
    # the SDK sends in a session.update after session.created, is the server's business and stays.
    set_tracing_disabled(True)
    agent = RealtimeAgent(
        name="Weather assistant",
        instructions="You answer questions about the weather. Always use the get_weather tool, then say its result in one sentence.",
        tools=[get_weather],
    )
    settings: dict[str, Any] = {"model_name": args.model}
    if args.modality:
        settings["modalities"] = [args.modality]
    runner = RealtimeRunner(agent, config={"model_settings": settings})
    session = await runner.run(model_config={"url": args.url, "api_key": args.key})

    question = "What's the weather in Paris?"
    message: Any = question
    if args.image:
        image_url = "data:image/png;base64," + base64.b64encode(tiny_png()).decode("ascii")
        message = {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": question},
                {"type": "input_image", "image_url": image_url, "detail": "low"},
            ],
        }

    transcripts: dict[str, str] = {}
    tool_started = False
    tool_starts = 0
    responses_after_tool: set[str] = set()
    async with session:
        await session.send_message(message)
        async for event in session:
            if event.type == "raw_model_event":
                model_event = event.data
                if model_event.type != "raw_server_event":
                    continue
                data = model_event.data if isinstance(model_event.data, dict) else {}
                kind = data.get("type")
                emit("server", **server_event_summary(data))
                if kind == "response.created" and tool_started:
                    responses_after_tool.add(data["response"]["id"])
                elif kind == "response.output_audio_transcript.done":
                    transcripts[data["response_id"]] = data.get("transcript", "")
                    emit("transcript", response_id=data["response_id"], text=data.get("transcript", ""))
                elif kind == "response.output_text.done":
                    transcripts[data["response_id"]] = data.get("text", "")
                    emit("transcript", response_id=data["response_id"], text=data.get("text", ""))
                elif kind == "response.done":
                    response = data["response"]
                    response_id = response["id"]
                    if response_id in responses_after_tool and transcripts.get(response_id):
                        emit("done", transcript=transcripts[response_id], status=response.get("status"))
                        return 0
                    calls = [o for o in response.get("output") or [] if o.get("type") == "function_call"]
                    if not tool_started and not calls:
                        # The model answered the question itself: the tool will not be called.
                        emit("no_tool_call", transcript=transcripts.get(response_id, ""), status=response.get("status"))
                        return 3
            elif event.type == "tool_start":
                tool_started = True
                tool_starts += 1
                emit("tool_start", name=event.tool.name, arguments=event.arguments)
                if tool_starts > MAX_TOOL_CALLS:
                    emit("tool_loop", calls=tool_starts)
                    return 4
            elif event.type == "tool_end":
                emit("tool_end", name=event.tool.name, output=event.output)
            elif event.type == "error":
                emit("error", error=event.error)
    emit("ended", reason="the session ended before an answer after the tool")
    return 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="ws://HOST:PORT/v1/realtime")
    parser.add_argument("--key", required=True)
    parser.add_argument("--model", default="gpt-realtime")
    parser.add_argument("--modality", choices=["audio", "text"], default=None, help="default: the SDK's (audio)")
    parser.add_argument("--image", action="store_true", help="send a small PNG with the question")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    async def bounded() -> int:
        try:
            return await asyncio.wait_for(run(args), args.timeout)
        except asyncio.TimeoutError:
            emit("timeout", after_s=args.timeout)
            return 1

    return asyncio.run(bounded())


if __name__ == "__main__":
    sys.exit(main())
