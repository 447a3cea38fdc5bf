"""Pipecat's OpenAIRealtimeLLMService against this server, over WebSocket, without a transport.

A pipeline of the service between LLMContextAggregatorPair's aggregators, with probes at its head
and tail, is driven with frames directly: a camera frame (InputImageRawFrame, RGB, which the
service sends as a user message holding one input_image part, a JPEG data URI, as it does with a
transport's video at most once a second) and then LLMRunFrame for a context holding the user's
question and a get_weather function (registered with the service). The service sends the context
as conversation items, session.update with the tools and response.create; when the model calls
get_weather the handler's result goes back as a function_call_output and the assistant aggregator
asks for the next response. What it saw goes to stdout as JSON lines, one object each with an
"event" key, for test/clients/pipecat.test.ts to assert on:

  {"event": "server", "type": ..., "item": {...}, ...}   every server event pipecat parsed, in order
  {"event": "client", "type": ..., "item_id": ...}      every client event the service sent
  {"event": "parse_error", "message": ...}              a server event pipecat's models refused
  {"event": "tool_called", "name": ..., "arguments": {...}}  inside the registered function
  {"event": "text", "text": ...}                        the model's text or transcript pieces
  {"event": "error", "error": ..., "fatal": ...}        an ErrorFrame (pipecat treats server errors as fatal)
  {"event": "done", "transcript": ...}                  the answer after the function's result
  {"event": "no_tool_call", "transcript": ...}          an answer without a call came first (exit 3)
  {"event": "timeout", "after_s": ...}                  nothing conclusive in time (exit 1)
  {"event": "ended", "reason": ...}                     the pipeline ended first (exit 2)

Exit status: 0 after "done", 1 on timeout, 2 when the pipeline ended before an answer, 3 when the
model answered without calling the function.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    FunctionCallResultFrame,
    InputImageRawFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMRunFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events as rt_events
from pipecat.services.openai.realtime.events import SessionProperties
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
from pipecat.turns.user_turn_strategies import ExternalUserTurnStrategies
from pipecat.workers.runner import WorkerRunner

WEATHER = {"conditions": "sunny", "temperature_c": 22}
FRAME_SIZE = (64, 48)


_emit_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    # One write per line, under a lock: tools may run in worker threads.
    line = json.dumps({"event": event, **fields}, default=str) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def camera_frame() -> InputImageRawFrame:
    """A 64x48 RGB test card: four coloured quarters."""
    width, height = FRAME_SIZE
    colours = [(220, 40, 40), (40, 180, 60), (40, 80, 220), (240, 220, 40)]
    pixels = bytearray()
    for y in range(height):
        for x in range(width):
            pixels += bytes(colours[(y >= height // 2) * 2 + (x >= width // 2)])
    return InputImageRawFrame(image=bytes(pixels), size=FRAME_SIZE, format="RGB")


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


def watch_server_events() -> None:
    """Reports every server event pipecat parses, and the ones its models refuse."""
    parse = rt_events.parse_server_event

    def reporting_parse(message: str):
        try:
            parsed = parse(message)
        except Exception as e:  # pipecat's receive loop dies on this; say why first
            emit("parse_error", message=str(e)[:2000])
            raise
        try:
            emit("server", **server_event_summary(json.loads(message)))
        except ValueError:
            pass
        return parsed

    rt_events.parse_server_event = reporting_parse


class ReportingRealtimeService(OpenAIRealtimeLLMService):
    """The stock service, reporting the client events it sends (types and item shapes only)."""

    async def send_client_event(self, event: rt_events.ClientEvent):
        fields: dict[str, Any] = {"type": getattr(event, "type", None)}
        item = getattr(event, "item", None)
        if item is not None:
            fields["item_id"] = item.id
            fields["item_type"] = item.type
            fields["content_types"] = [c.type for c in item.content or []]
        session = getattr(event, "session", None)
        if session is not None and isinstance(session.tools, list):
            fields["tools"] = [t.get("name") for t in session.tools if isinstance(t, dict)]
        emit("client", **fields)
        await super().send_client_event(event)


class Probe(FrameProcessor):
    """Passes every frame on, showing it to a callback first."""

    def __init__(self, name: str, on_frame):
        super().__init__(name=name)
        self._on_frame = on_frame

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        await self._on_frame(frame, direction)
        await self.push_frame(frame, direction)


async def run(args: argparse.Namespace) -> int:
    watch_server_events()
    finished: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    state = {"called": False, "result_sent": False, "answering": False, "text": "", "text_before_call": ""}

    llm = ReportingRealtimeService(
        api_key=args.key,
        base_url=args.url,
        settings=OpenAIRealtimeLLMService.Settings(
            model=args.model,
            system_instruction="You answer questions about the weather. Always use the get_weather function, then say its result in one sentence.",
            session_properties=SessionProperties(output_modalities=[args.modality] if args.modality else None),
        ),
    )

    async def get_weather(params: FunctionCallParams):
        state["called"] = True
        emit("tool_called", name=params.function_name, arguments=dict(params.arguments))
        await params.result_callback({**WEATHER, "city": params.arguments.get("city")})

    llm.register_function("get_weather", get_weather)
    tools = ToolsSchema(
        standard_tools=[
            FunctionSchema(
                name="get_weather",
                description="Get the current weather in a city.",
                properties={"city": {"type": "string", "description": "The city's name, e.g. Paris."}},
                required=["city"],
            )
        ]
    )
    context = LLMContext([{"role": "user", "content": "What's the weather in Paris?"}], tools)
    # The service's own turn strategies (what it announces with server-side VAD on), given up
    # front: the default ones would load a local Smart Turn model that is never used here.
    user_aggregator, assistant_aggregator = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(user_turn_strategies=ExternalUserTurnStrategies())
    )

    def finish(code: int) -> None:
        if not finished.done():
            finished.set_result(code)

    async def at_head(frame: Frame, direction: FrameDirection):
        if isinstance(frame, ErrorFrame):
            emit("error", error=frame.error, fatal=frame.fatal)

    async def at_tail(frame: Frame, direction: FrameDirection):
        if direction != FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, FunctionCallResultFrame):
            state["result_sent"] = True
        elif isinstance(frame, LLMFullResponseStartFrame):
            # The answer is a response that starts after the result went back: the words of the
            # response that made the call (a preamble) may still be arriving after it did.
            state["answering"] = state["result_sent"]
        elif isinstance(frame, LLMTextFrame):
            key = "text" if state["answering"] else "text_before_call"
            state[key] += frame.text
            emit("text", text=frame.text)
        elif isinstance(frame, LLMFullResponseEndFrame):
            if state["answering"] and state["text"].strip():
                emit("done", transcript=state["text"].strip())
                finish(0)
            elif not state["called"] and state["text_before_call"].strip():
                # The model answered the question itself: the function will not be called.
                emit("no_tool_call", transcript=state["text_before_call"].strip())
                finish(3)

    pipeline = Pipeline(
        [
            Probe("head", at_head),
            user_aggregator,
            llm,
            Probe("tail", at_tail),
            assistant_aggregator,
        ]
    )
    worker = PipelineWorker(pipeline, params=PipelineParams(), idle_timeout_secs=None)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    running.add_done_callback(lambda _: finish(2))
    # The camera frame first (the service sends it as soon as it is connected), then the turn.
    await worker.queue_frames([camera_frame(), LLMRunFrame()])
    try:
        code = await asyncio.wait_for(asyncio.shield(finished), args.timeout)
    except asyncio.TimeoutError:
        emit("timeout", after_s=args.timeout)
        code = 1
    if code == 2:
        emit("ended", reason="the pipeline ended before an answer after the function's result")
    await worker.cancel()
    try:
        await asyncio.wait_for(running, 10)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        pass
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="ws://HOST:PORT/v1/realtime (pipecat adds ?model=)")
    parser.add_argument("--key", required=True)
    parser.add_argument("--model", default="gpt-realtime")
    parser.add_argument("--modality", choices=["audio", "text"], default=None, help="default: pipecat's (audio)")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
