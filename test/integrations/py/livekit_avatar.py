"""The LiveKit plugin (integrations/livekit: avatar_server_livekit) against the avatar server,
without a LiveKit server: the plugin's production path, LiveKit's own `AvatarRunner` reading our
`ServerTimedAudioOutput` (a `QueueAudioOutput`) into our `AvatarServerVideoGenerator`, with a
stand-in for the room that records what the runner publishes. The script plays the agent: it
pushes real speech (a recording) in 20 ms `rtc.AudioFrame`s through the audio output as an
`AgentSession` does (capture_frame, flush, clear_buffer, wait_for_playout) and listens to the
audio output's playback_started / playback_finished, as the session's transcript synchronizer
and turn state do.

  segment 1  the recording at 16 kHz, pushed 4x faster than real time (as a TTS does), flushed,
             and waited for
  segment 2  the recording at 24 kHz, 4x faster than real time, cut by a barge-in (flush, then
             clear_buffer) --interrupt-after seconds after it started playing
  segment 3  the recording's first second at 16 kHz after the barge-in: speech resumes
  listen     avatar.listen true, then false

Prints one JSON line per observation, each with `t` (ms since the script started):
  connected {session_id, width, height, fps, format, session_video, connect_ms}
            (width/height/fps: the generator's, for AvatarOptions; session_video: the session
            object's `video`)
  sent {type, segment_id}         what the plugin sent the server: each commit and clear, and
                                  the first append of each segment id
  video {pts_ms, index, width, height, buffer, bytes, segment_id}   every frame the runner got
  audio {pts_ms, segment_id, rate, channels, samples, rms}   every played-audio frame
  segment_end                                            an AudioSegmentEnd the runner got
  push {segment, rate, frames, pushed_ms, phase: start|end}
  playback_started {segment}      the audio output's event (what AgentSession hears)
  playback_finished {segment, playback_position, interrupted}
  gen_started {segment, segment_id}, gen_finished {segment, segment_id, playback_position,
            interrupted}          the generator's own events, naming the plugin's segment id
  playout {segment, playback_position, interrupted}   what wait_for_playout() returned
  clear {segment, pushed_ms, last_pts_ms}   the barge-in; last_pts_ms is the newest played
                                            audio's pts when it was sent
  server {type, ...}              the server's output_audio_buffer.* events and errors
  published {kind, name}          a track AvatarRunner published (the room stand-in)
  latency {first_push_to_started_ms, first_push_to_voiced_audio_ms}
  summary {...}, done {ok}

With --bad-key: `refused {error}` (the AvatarServerError connect() raised), then done.

With --livekit-url (a LiveKit server, e.g. `livekit-server --dev`), the whole room instead: a
real `AgentSession` (its voice a recording, RecordingTTS below; no recogniser or model) with the
plugin started by the two lines of an entrypoint, `AvatarSession(...)` and
`await avatar.start(session, room=room)`, in one rtc.Room, and a user in a second rtc.Room who
subscribes to what the agent publishes. `session.say()` once to the end, once interrupted by
`session.interrupt()`, then the user's state set to speaking and back. Lines:
  room_connected {room}, avatar_started {session_id, width, height, fps, start_ms}
  agent_state {old, new}, user_state {old, new}, listen {listening}
  say {n, phase: start|done, interrupted}, interrupt {n}
  item {role, text, interrupted}     conversation_item_added
  transcription {text, final, segment_id}   what the user got on lk.transcription
  user_track {kind, name, participant}
  user_media {video_frames, video_sizes, first_video_ms, audio_frames, voiced_windows:[...]}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import wave
from typing import Any

import numpy as np
from avatar_server_livekit import (
    OUTPUT_SAMPLE_RATE,
    AvatarServerError,
    AvatarServerVideoGenerator,
    ServerTimedAudioOutput,
)
from livekit import rtc
from livekit.agents.voice.avatar import AudioSegmentEnd, AvatarOptions, AvatarRunner

T0 = time.monotonic()


def now_ms() -> float:
    return round((time.monotonic() - T0) * 1000, 1)


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": now_ms(), **fields}), flush=True)


def load_wav(path: str) -> tuple[np.ndarray, int]:
    with wave.open(path) as w:
        assert w.getsampwidth() == 2, "PCM16 WAV expected"
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        if w.getnchannels() > 1:
            data = data.reshape(-1, w.getnchannels())[:, 0]
        return data.astype(np.int16), w.getframerate()


def resample(x: np.ndarray, src: int, dst: int) -> np.ndarray:
    """Linear interpolation: good enough for lips to move; the point is another input rate."""
    n = int(round(len(x) * dst / src))
    t = np.arange(n) * (src / dst)
    return np.interp(t, np.arange(len(x)), x.astype(np.float64)).round().astype(np.int16)


def frames_of(x: np.ndarray, rate: int, ms: int = 20) -> list[rtc.AudioFrame]:
    step = rate * ms // 1000
    out = []
    for i in range(0, len(x), step):
        chunk = x[i : i + step]
        out.append(rtc.AudioFrame(chunk.tobytes(), rate, 1, len(chunk)))
    return out


class FakePublication:
    def __init__(self, track: Any) -> None:
        self.track = track

    async def wait_for_subscription(self) -> None:
        return None


class FakeLocalParticipant:
    identity = "agent-under-test"

    async def publish_track(self, track: Any, options: Any) -> FakePublication:
        kind = "video" if isinstance(track, rtc.LocalVideoTrack) else "audio"
        emit("published", kind=kind, name=track.name)
        return FakePublication(track)


class FakeRoom(rtc.EventEmitter[str]):
    """What AvatarRunner uses of an rtc.Room: connected, and a local participant to publish."""

    name = "no-livekit-server"

    def __init__(self) -> None:
        super().__init__()
        self.local_participant = FakeLocalParticipant()

    def isconnected(self) -> bool:
        return True


class TappedGenerator(AvatarServerVideoGenerator):
    """The plugin's generator, reporting each item the runner takes from it."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.first_voiced_audio_t: float | None = None
        self._appended_ids: set[str] = set()

    def _send(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "output_audio_buffer.append":
            sid = event.get("segment_id")
            if sid not in self._appended_ids:
                self._appended_ids.add(sid)
                emit("sent", type=kind, segment_id=sid)
        elif kind in ("output_audio_buffer.commit", "output_audio_buffer.clear"):
            emit("sent", type=kind)
        super()._send(event)

    def __aiter__(self):  # type: ignore[override]
        return self._tapped()

    async def _tapped(self):
        async for item in super().__aiter__():
            if isinstance(item, rtc.VideoFrame):
                emit(
                    "video",
                    pts_ms=getattr(item, "pts_ms", None),
                    index=getattr(item, "frame_index", None),
                    width=item.width,
                    height=item.height,
                    buffer=rtc.VideoBufferType.Name(item.type),
                    bytes=len(item.data),
                    segment_id=getattr(item, "segment_id", None),
                )
            elif isinstance(item, rtc.AudioFrame):
                x = np.frombuffer(item.data, dtype=np.int16).astype(np.float64)
                rms = float(np.sqrt(np.mean(x * x))) if len(x) else 0.0
                if rms > 300 and self.first_voiced_audio_t is None:
                    self.first_voiced_audio_t = time.monotonic()
                emit(
                    "audio",
                    pts_ms=item.userdata.get("pts_ms"),
                    segment_id=item.userdata.get("segment_id"),
                    rate=item.sample_rate,
                    channels=item.num_channels,
                    samples=item.samples_per_channel,
                    rms=round(rms, 1),
                )
            elif isinstance(item, AudioSegmentEnd):
                emit("segment_end")
            yield item


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--livekit-url", help="ws://host:port of a LiveKit server: the whole-room test")
    ap.add_argument("--livekit-key", default="devkey")
    ap.add_argument("--livekit-secret", default="secret")
    ap.add_argument("--url", required=True, help="the server, http://host:port")
    ap.add_argument("--key", required=True)
    ap.add_argument("--wav", required=True, help="PCM16 speech (16 kHz mono)")
    ap.add_argument("--format", default="i420", choices=["i420", "jpeg"])
    ap.add_argument("--interrupt-after", type=float, default=0.8)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--bad-key", action="store_true", help="connect with a key the server refuses")
    args = ap.parse_args()

    if args.bad_key:
        gen = AvatarServerVideoGenerator(
            base_url=args.url, api_key=args.key + "-wrong", connect_timeout=10
        )
        try:
            await gen.connect()
            emit("connected", session_id=gen.session.get("id"))
            await gen.aclose()
        except AvatarServerError as e:
            emit("refused", error=str(e))
        emit("done", ok=True)
        return 0

    speech, rate = load_wav(args.wav)
    speech16 = resample(speech, rate, 16000) if rate != 16000 else speech
    speech24 = resample(speech, rate, 24000)
    if args.livekit_url:
        return await room_main(args, speech16)

    gen = TappedGenerator(base_url=args.url, api_key=args.key, video_format=args.format)
    gen.on(
        "server_event",
        lambda ev: (
            emit("server", **{k: v for k, v in ev.items() if k not in ("delta", "event_id")})
            if ev.get("type", "").startswith("output_audio_buffer.") or ev.get("type") == "error"
            else None
        ),
    )
    t = time.monotonic()
    await gen.connect()
    emit(
        "connected",
        session_id=gen.session.get("id"),
        width=gen.video_width,
        height=gen.video_height,
        fps=gen.video_fps,
        format=gen.session.get("video", {}).get("format"),
        session_video=gen.session.get("video"),
        connect_ms=round((time.monotonic() - t) * 1000, 1),
    )

    audio_output = ServerTimedAudioOutput(gen)
    current = {"segment": 0}
    started: dict[int, asyncio.Event] = {}

    def on_started(ev: Any) -> None:
        seg = current["segment"]
        emit("playback_started", segment=seg)
        started.setdefault(seg, asyncio.Event()).set()

    def on_finished(ev: Any) -> None:
        emit(
            "playback_finished",
            segment=current["segment"],
            playback_position=round(ev.playback_position, 3),
            interrupted=ev.interrupted,
        )

    audio_output.on("playback_started", on_started)
    audio_output.on("playback_finished", on_finished)
    gen.on(
        "playback_started",
        lambda ev: emit("gen_started", segment=current["segment"], segment_id=ev.segment_id),
    )
    gen.on(
        "playback_finished",
        lambda ev: emit(
            "gen_finished",
            segment=current["segment"],
            segment_id=ev.segment_id,
            playback_position=round(ev.playback_position, 3),
            interrupted=ev.interrupted,
        ),
    )

    runner = AvatarRunner(
        FakeRoom(),  # type: ignore[arg-type]
        audio_recv=audio_output,
        video_gen=gen,
        options=AvatarOptions(
            video_width=gen.video_width,
            video_height=gen.video_height,
            video_fps=gen.video_fps,
            audio_sample_rate=OUTPUT_SAMPLE_RATE,
            audio_channels=1,
        ),
    )
    await runner.start()

    async def push(
        seg: int, frames: list[rtc.AudioFrame], pace: float, stop: asyncio.Event | None = None
    ) -> float:
        pushed = 0.0
        emit(
            "push",
            segment=seg,
            phase="start",
            rate=frames[0].sample_rate,
            frames=len(frames),
            pushed_ms=0,
        )
        for f in frames:
            if stop is not None and stop.is_set():
                break
            await audio_output.capture_frame(f)
            pushed += f.duration
            await asyncio.sleep(f.duration / pace)
        emit(
            "push",
            segment=seg,
            phase="end",
            rate=frames[0].sample_rate,
            frames=len(frames),
            pushed_ms=round(pushed * 1000, 1),
        )
        return pushed

    async def scenario() -> None:
        # 1: a whole segment, faster than real time
        current["segment"] = 1
        first_push = time.monotonic()
        started.setdefault(1, asyncio.Event())
        push1 = asyncio.create_task(push(1, frames_of(speech16, 16000), pace=4.0))
        await started[1].wait()
        started_ms = (time.monotonic() - first_push) * 1000
        await push1
        audio_output.flush()
        ev = await audio_output.wait_for_playout()
        emit(
            "playout",
            segment=1,
            playback_position=round(ev.playback_position, 3),
            interrupted=ev.interrupted,
        )
        voiced = gen.first_voiced_audio_t
        emit(
            "latency",
            first_push_to_started_ms=round(started_ms, 1),
            first_push_to_voiced_audio_ms=round((voiced - first_push) * 1000, 1)
            if voiced
            else None,
        )

        # 2: real-time pacing, cut by a barge-in
        current["segment"] = 2
        started.setdefault(2, asyncio.Event())
        stop = asyncio.Event()
        push2 = asyncio.create_task(push(2, frames_of(speech24, 24000), pace=4.0, stop=stop))
        await started[2].wait()
        await asyncio.sleep(args.interrupt_after)
        stop.set()
        pushed2 = await push2
        # what generation.py does when a reply is interrupted: flush, clear, wait for the playout
        audio_output.flush()
        audio_output.clear_buffer()
        emit("clear", segment=2, pushed_ms=round(pushed2 * 1000, 1), last_pts_ms=gen.last_pts_ms)
        ev = await audio_output.wait_for_playout()
        emit(
            "playout",
            segment=2,
            playback_position=round(ev.playback_position, 3),
            interrupted=ev.interrupted,
        )
        await asyncio.sleep(1.0)  # the returned audio must be silent now

        # 3: speech resumes after the barge-in
        current["segment"] = 3
        await push(3, frames_of(speech16[:16000], 16000), pace=4.0)
        audio_output.flush()
        ev = await audio_output.wait_for_playout()
        emit(
            "playout",
            segment=3,
            playback_position=round(ev.playback_position, 3),
            interrupted=ev.interrupted,
        )

        gen.set_listening(True)
        await asyncio.sleep(0.3)
        gen.set_listening(False)
        await asyncio.sleep(0.3)

    ok = True
    try:
        await asyncio.wait_for(scenario(), args.timeout)
    except asyncio.TimeoutError:
        emit("timeout")
        ok = False
    emit(
        "summary",
        skipped_video=gen.skipped_video,
        skipped_audio=gen.skipped_audio,
        av_sync_fps=round(runner.av_sync.actual_fps, 2),
    )
    await runner.aclose()
    await gen.aclose()
    emit("done", ok=ok)
    return 0 if ok else 1


# -- the whole room ----------------------------------------------------------------------------

SAY_TEXT = "Hello there, this is the avatar speaking to you through a LiveKit room today."


def make_recording_tts(pcm: np.ndarray, rate: int) -> Any:
    """A TTS whose every utterance is the recording, in 20 ms chunks faster than real time."""
    from livekit.agents import tts
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

    class RecordingStream(tts.ChunkedStream):
        async def _run(self, output_emitter: tts.AudioEmitter) -> None:
            output_emitter.initialize(
                request_id="recording",
                sample_rate=rate,
                num_channels=1,
                mime_type="audio/pcm",
                frame_size_ms=20,
            )
            step = rate // 50
            for i in range(0, len(pcm), step):
                output_emitter.push(pcm[i : i + step].tobytes())
                await asyncio.sleep(0.005)
            output_emitter.flush()

    class RecordingTTS(tts.TTS):
        def __init__(self) -> None:
            super().__init__(
                capabilities=tts.TTSCapabilities(streaming=False), sample_rate=rate, num_channels=1
            )

        def synthesize(
            self, text: str, *, conn_options: Any = DEFAULT_API_CONNECT_OPTIONS
        ) -> tts.ChunkedStream:
            return RecordingStream(tts=self, input_text=text, conn_options=conn_options)

    return RecordingTTS()


async def room_main(args: argparse.Namespace, speech16: np.ndarray) -> int:
    from avatar_server_livekit import AvatarSession
    from livekit import api
    from livekit.agents import Agent, AgentSession, room_io

    room_name = f"avatar-test-{int(time.time() * 1000)}"

    def token(identity: str, kind: str) -> str:
        return (
            api.AccessToken(args.livekit_key, args.livekit_secret)
            .with_identity(identity)
            .with_kind(kind)  # type: ignore[arg-type]
            .with_grants(api.VideoGrants(room_join=True, room=room_name))
            .to_jwt()
        )

    # the user: subscribes to whatever the agent publishes
    user_room = rtc.Room()
    media: dict[str, Any] = {
        "video_frames": 0,
        "video_sizes": set(),
        "first_video_ms": None,
        "audio": [],
    }
    tasks: list[asyncio.Task[Any]] = []

    async def read_video(track: rtc.Track) -> None:
        async for ev in rtc.VideoStream(track):
            media["video_frames"] += 1
            media["video_sizes"].add(f"{ev.frame.width}x{ev.frame.height}")
            if media["first_video_ms"] is None:
                media["first_video_ms"] = now_ms()

    async def read_audio(track: rtc.Track) -> None:
        async for ev in rtc.AudioStream(track, sample_rate=24000, num_channels=1):
            x = np.frombuffer(ev.frame.data, dtype=np.int16).astype(np.float64)
            media["audio"].append((now_ms(), float(np.sqrt(np.mean(x * x))) if len(x) else 0.0))

    def on_track(
        track: rtc.Track, pub: rtc.RemoteTrackPublication, participant: rtc.RemoteParticipant
    ) -> None:
        kind = "video" if track.kind == rtc.TrackKind.KIND_VIDEO else "audio"
        emit("user_track", kind=kind, name=pub.name, participant=participant.identity)
        tasks.append(
            asyncio.create_task(read_video(track) if kind == "video" else read_audio(track))
        )

    user_room.on("track_subscribed", on_track)

    async def on_text(reader: rtc.TextStreamReader, participant: str) -> None:
        text = await reader.read_all()
        attrs = reader.info.attributes or {}
        emit(
            "transcription",
            text=text,
            final=attrs.get("lk.transcription_final"),
            segment_id=attrs.get("lk.segment_id"),
            participant=participant,
        )

    user_room.register_text_stream_handler(
        "lk.transcription",
        lambda reader, who: tasks.append(asyncio.create_task(on_text(reader, who))),
    )
    await user_room.connect(args.livekit_url, token("user", "standard"))

    # the agent, as an entrypoint has it
    room = rtc.Room()
    await room.connect(args.livekit_url, token("agent", "agent"))
    emit("room_connected", room=room_name)
    session = AgentSession(tts=make_recording_tts(speech16, 16000))
    session.on(
        "agent_state_changed", lambda ev: emit("agent_state", old=ev.old_state, new=ev.new_state)
    )
    session.on(
        "user_state_changed", lambda ev: emit("user_state", old=ev.old_state, new=ev.new_state)
    )
    session.on(
        "conversation_item_added",
        lambda ev: emit(
            "item",
            role=getattr(ev.item, "role", None),
            text=getattr(ev.item, "text_content", None),
            interrupted=getattr(ev.item, "interrupted", None),
        ),
    )

    t = time.monotonic()
    avatar = AvatarSession(base_url=args.url, api_key=args.key, video_format=args.format)
    await avatar.start(session, room=room)
    gen = avatar.generator
    emit(
        "avatar_started",
        session_id=gen.session.get("id"),
        width=gen.video_width,
        height=gen.video_height,
        fps=gen.video_fps,
        start_ms=round((time.monotonic() - t) * 1000, 1),
    )
    gen.on(
        "server_event",
        lambda ev: (
            emit("server", **{k: v for k, v in ev.items() if k not in ("delta", "event_id")})
            if ev.get("type", "").startswith("output_audio_buffer.") or ev.get("type") == "error"
            else None
        ),
    )
    set_listening = gen.set_listening

    def traced_listening(listening: bool) -> None:
        emit("listen", listening=listening)
        set_listening(listening)

    gen.set_listening = traced_listening  # type: ignore[method-assign]

    await session.start(
        Agent(instructions="You are the avatar in a test."),
        room=room,
        room_options=room_io.RoomOptions(audio_input=False),
        record=False,
    )

    async def scenario() -> None:
        await asyncio.sleep(0.5)
        emit("say", n=1, phase="start")
        h1 = session.say(SAY_TEXT)
        await h1
        emit("say", n=1, phase="done", interrupted=h1.interrupted)
        await asyncio.sleep(0.5)

        emit("say", n=2, phase="start")
        h2 = session.say(SAY_TEXT)
        while session.agent_state != "speaking":
            await asyncio.sleep(0.01)
        await asyncio.sleep(args.interrupt_after)
        emit("interrupt", n=2)
        await session.interrupt()
        await h2
        emit("say", n=2, phase="done", interrupted=h2.interrupted)
        await asyncio.sleep(1.0)

        # the user speaks (what the recogniser/VAD would say): avatar.listen true, then false
        session._update_user_state("speaking")
        await asyncio.sleep(0.5)
        session._update_user_state("listening")
        await asyncio.sleep(0.5)

    ok = True
    try:
        await asyncio.wait_for(scenario(), args.timeout)
    except asyncio.TimeoutError:
        emit("timeout")
        ok = False

    audio = media["audio"]
    voiced = [(t, r) for t, r in audio if r > 300]
    windows: list[list[float]] = []
    for tm, _ in voiced:
        if windows and tm - windows[-1][1] <= 200:
            windows[-1][1] = tm
        else:
            windows.append([tm, tm])
    emit("skipped", video=gen.skipped_video, audio=gen.skipped_audio)
    emit(
        "user_media",
        video_frames=media["video_frames"],
        video_sizes=sorted(media["video_sizes"]),
        first_video_ms=media["first_video_ms"],
        audio_frames=len(audio),
        voiced_windows=windows,
    )
    await session.aclose()
    await avatar.aclose()
    for task in tasks:
        task.cancel()
    await room.disconnect()
    await user_room.disconnect()
    emit("done", ok=ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
