"""
openai-python's realtime client (AsyncOpenAI().realtime.connect, unchanged but for the base URL
and key) in a transcription session, as its docstring says to open one (intent=transcription, no
model): the session set up with session.update in the SDK's own params, a spoken question streamed
with input_audio_buffer.append, and every server event read as bytes and validated by pydantic
against the SDK's RealtimeServerEvent union (the types `recv()` builds its objects from, here
checked rather than constructed). Ends at the first completed transcription's item done, an
error event, or the timeout.

Prints one JSON line per event: {"event": "server", "type", "model": the SDK class it validated
as, "session_class" (session events), "transcript" (completions)}, {"event": "invalid", "type",
"error"} for one that does not validate, then {"event": "done"}.
"""
import argparse
import asyncio
import base64

from openai import AsyncOpenAI
from openai.types.realtime import RealtimeServerEvent

from sdk_events import emit, validated_events, within

CHUNK_BYTES = 9600  # 200 ms of PCM16 at 24 kHz


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--audio", required=True, help="raw PCM16 mono 24 kHz")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args()

    client = AsyncOpenAI(base_url=args.base_url, api_key=args.key, max_retries=0)
    with open(args.audio, "rb") as f:
        pcm = f.read()

    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
                        "turn_detection": {"type": "server_vad", "threshold": 0.5, "silence_duration_ms": 500},
                    }
                },
            }
        )
        for i in range(0, len(pcm), CHUNK_BYTES):
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i : i + CHUNK_BYTES]).decode())

        completed_item = None
        async def read() -> None:
            nonlocal completed_item
            async for kind, event, _ in validated_events(conn, RealtimeServerEvent):
                line = {"event": "server", "type": kind, "model": type(event).__name__}
                session = getattr(event, "session", None)
                if session is not None:
                    line["session_class"] = type(session).__name__
                    line["session_type"] = session.type
                if kind == "conversation.item.input_audio_transcription.completed":
                    line["transcript"] = event.transcript
                    completed_item = event.item_id
                emit(**line)
                if kind == "error":
                    return
                if kind == "conversation.item.done" and completed_item is not None and event.item.id == completed_item:
                    return

        await within(read, args.timeout)
    emit(event="done")


asyncio.run(main())
