"""
openai-python's GPT-Live client over WebRTC, as its docs give it: an aiortc peer (the question
played as its microphone from a WAV file, video received, a data channel) whose offer goes to
client.live.create(session=..., transport={"type": "webrtc", "sdp": ...}), unchanged but for
the base URL and key; the answer applied, the session starts by itself. Every data-channel event
is validated against the SDK's live ServerEvent union; the avatar's audio and video are counted
as aiortc decodes them. Once the session has started, a backend's sideband attaches
(client.live.sideband.connect(session_id=...)): its events validated against the SDK's
ConnectServerEvent union, the reflected input and output audio counted, an instruction appended
through it, and a SIP-only command refused to it. Once the reply has been spoken the session is
hung up by REST (client.live.sessions.hangup); ends with session.closed on both, an error, or
the timeout.

Prints JSON lines: {"event": "created", "class", "session_id"}, {"event": "server", "type",
"model", ...} (the data channel), {"event": "sideband", "type", "model", ...}, {"event":
"invalid", ...}, {"event": "media", "audio_frames", "video_frames", "reflected_in_bytes",
"reflected_out_bytes", "reflected_out_ranges"}, {"event": "hung_up"}, {"event": "timeout"}, then
{"event": "done"}.
"""
import argparse
import asyncio
import base64
import json

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer
from openai import AsyncOpenAI
from openai.types.live import ConnectServerEvent, ServerEvent
from pydantic import TypeAdapter, ValidationError

from sdk_events import emit, validated_events


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
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    started = loop.create_future()
    sideband_closed = loop.create_future()
    reflected = {"in": 0, "out": 0, "ranges": []}
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
        if kind == "session.started" and not started.done():
            started.set_result(event.session.id)
        if kind == "session.usage.updated" and not answered:
            answered = True  # the reply has been spoken
            emit(event="media", audio_frames=frames["audio"], video_frames=frames["video"], reflected_in_bytes=reflected["in"], reflected_out_bytes=reflected["out"], reflected_out_ranges=reflected["ranges"][:3])
            asyncio.ensure_future(hang_up())
        if kind in ("session.closed", "error") and not finished.done():
            finished.set_result(None)

    async def hang_up():
        await client.live.sessions.hangup(created.session.id)
        emit(event="hung_up")

    async def sideband(session_id):
        async with client.live.sideband.connect(session_id=session_id) as sb:
            async for kind, event, _ in validated_events(sb, ConnectServerEvent):
                if kind == "session.input_audio.append":
                    reflected["in"] += len(base64.b64decode(event.audio))
                    continue
                if kind == "session.output_audio.delta":
                    reflected["out"] += len(base64.b64decode(event.delta))
                    reflected["ranges"].append([event.start_ms, event.end_ms])
                    continue
                line = {"event": "sideband", "type": kind, "model": type(event).__name__}
                if kind == "info":
                    line.update(code=event.code)
                    await sb.send({"type": "session.instructions.append", "event_id": "sb_ins", "content": "The user is called Ann."})
                    await sb.send({"type": "transport.dtmf.send", "event_id": "sb_dtmf", "event": "1"})
                if kind == "error":
                    line.update(code=event.error.code, client_event_id=event.error.client_event_id)
                if kind == "session.instructions.appended":
                    line.update(client_event_id=event.client_event_id)
                if kind == "session.closed":
                    line.update(reason=event.reason)
                emit(**line)
                if kind == "session.closed":
                    break
        sideband_closed.set_result(None)

    await pc.setLocalDescription(await pc.createOffer())
    while pc.iceGatheringState != "complete":
        await asyncio.sleep(0.05)
    created = await client.live.create(session={"model": "gpt-live-1", "instructions": "Be brief."}, transport={"type": "webrtc", "sdp": pc.localDescription.sdp})
    emit(event="created", **{"class": type(created).__name__, "session_id": created.session.id})
    await pc.setRemoteDescription(RTCSessionDescription(sdp=created.transport.sdp, type="answer"))
    try:
        sideband_task = asyncio.ensure_future(sideband(await asyncio.wait_for(started, args.timeout)))
        await asyncio.wait_for(asyncio.gather(finished, sideband_closed), args.timeout)
    except asyncio.TimeoutError:
        emit(event="timeout")
    await pc.close()
    emit(event="done")


asyncio.run(main())
