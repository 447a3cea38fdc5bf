"""
openai-python's GPT-Live client (AsyncOpenAI().live.connect, unchanged but for the base URL and
key) holding a spoken conversation with the avatar: session.start in the SDK's own params, a
spoken question streamed with session.input_audio.append (its silence included: Live takes a
continuous microphone), the model deciding when to answer with no client event, then
session.close. Every server event is read as bytes and validated by pydantic against the SDK's
live ServerEvent union, except the avatar's own frames (session.output_image.delta), which Live
has no type for and which are counted. Ends at session.closed, an error event, or the timeout.

Prints one JSON line per event: {"event": "server", "type", "model", ...fields the test reads},
{"event": "frame", "bytes"} for a frame, {"event": "invalid", "type", "error"} for one that does not
validate, then {"event": "done"}.
"""
import argparse
import asyncio
import base64

from openai import AsyncOpenAI
from openai.types.live import ServerEvent

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

    async with client.live.connect(max_retries=0) as conn:
        await conn.session.start(session={"model": "gpt-live-1", "instructions": "Be brief.", "audio": {"output": {"voice": "marin"}}}, event_id="start_1")

        async def read() -> None:
            replied = False
            async for kind, event, data in validated_events(conn, ServerEvent, passthrough=("session.output_image.delta",)):
                if event is None:
                    emit(event="frame", bytes=len(base64.b64decode(data["delta"])), pts_ms=data.get("pts_ms"))
                    continue
                line = {"event": "server", "type": kind, "model": type(event).__name__}
                if kind == "session.started":
                    line["session_id"] = event.session.id
                    line["client_event_id"] = event.client_event_id
                    for i in range(0, len(pcm), CHUNK_BYTES):
                        await conn.session.input_audio.append(audio=base64.b64encode(pcm[i : i + CHUNK_BYTES]).decode())
                if kind in ("session.input_transcript.delta", "session.output_transcript.delta"):
                    line.update(delta=event.delta, start_ms=event.start_ms, end_ms=event.end_ms)
                if kind == "session.output_audio.delta":
                    line["bytes"] = len(base64.b64decode(event.delta))
                if kind in ("session.usage.updated", "session.closed"):
                    line["seconds"] = event.usage.seconds
                if kind == "session.closed":
                    line["reason"] = event.reason
                emit(**line)
                if kind == "session.usage.updated" and not replied:
                    replied = True  # the reply has been spoken: end the session
                    await conn.session.close(event_id="bye")
                if kind in ("session.closed", "error"):
                    return

        await within(read, args.timeout)
    emit(event="done")


asyncio.run(main())
