"""
openai-python's GPT-Live client over WebRTC, as its docs give it: an aiortc peer (the question
played as its microphone from a WAV file, video received, a data channel) whose offer goes to
client.live.create(session=..., transport={"type": "webrtc", "sdp": ...}), unchanged but for
the base URL and key; the answer applied, the session starts by itself. Every data-channel event
is validated against the SDK's live ServerEvent union; the avatar's audio and video are counted
as aiortc decodes them. Ends with session.close on the data channel and its session.closed, an
error, or the timeout.

Prints JSON lines: {"event": "created", "class", "session_id"}, {"event": "server", "type",
"model", ...}, {"event": "invalid", ...}, {"event": "media", "audio_frames", "video_frames"},
{"event": "timeout"}, then {"event": "done"}.
"""
import argparse
import asyncio
import json

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer
from openai import AsyncOpenAI
from openai.types.live import ServerEvent
from pydantic import TypeAdapter, ValidationError

from sdk_events import emit


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--wav", required=True, help="the question, mono WAV")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args()

    adapter = TypeAdapter(ServerEvent)
    client = AsyncOpenAI(base_url=args.base_url, api_key=args.key, max_retries=0)
    pc = RTCPeerConnection()
    pc.addTrack(MediaPlayer(args.wav).audio)
    pc.addTransceiver("video", direction="recvonly")
    channel = pc.createDataChannel("oai-events")
    frames = {"audio": 0, "video": 0}
    finished = asyncio.get_running_loop().create_future()
    answered = False

    @pc.on("track")
    def on_track(track):
        async def pull():
            while True:
                try:
                    await track.recv()
                except Exception:
                    return
                frames[track.kind] += 1

        asyncio.ensure_future(pull())

    @channel.on("message")
    def on_message(raw):
        nonlocal answered
        kind = json.loads(raw).get("type")
        try:
            event = adapter.validate_json(raw)
        except ValidationError as err:
            emit(event="invalid", type=kind, error=str(err)[:1500])
            return
        line = {"event": "server", "type": kind, "model": type(event).__name__}
        if kind in ("session.input_transcript.delta", "session.output_transcript.delta"):
            line.update(delta=event.delta, start_ms=event.start_ms, end_ms=event.end_ms)
        if kind == "session.closed":
            line.update(reason=event.reason, seconds=event.usage.seconds)
        emit(**line)
        if kind == "session.usage.updated" and not answered:
            answered = True  # the reply has been spoken
            emit(event="media", audio_frames=frames["audio"], video_frames=frames["video"])
            channel.send(json.dumps({"type": "session.close", "event_id": "bye"}))
        if kind in ("session.closed", "error") and not finished.done():
            finished.set_result(None)

    await pc.setLocalDescription(await pc.createOffer())
    while pc.iceGatheringState != "complete":
        await asyncio.sleep(0.05)
    created = await client.live.create(session={"model": "gpt-live-1", "instructions": "Be brief."}, transport={"type": "webrtc", "sdp": pc.localDescription.sdp})
    emit(event="created", **{"class": type(created).__name__, "session_id": created.session.id})
    await pc.setRemoteDescription(RTCSessionDescription(sdp=created.transport.sdp, type="answer"))
    try:
        await asyncio.wait_for(finished, args.timeout)
    except asyncio.TimeoutError:
        emit(event="timeout")
    await pc.close()
    emit(event="done")


asyncio.run(main())
