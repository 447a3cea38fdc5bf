"""The pipecat plugin (integrations/pipecat, avatar_server_pipecat.AvatarVideoService) against this
server's avatar-only sessions, in a real pipecat pipeline without a transport.

    FakeTTS -> AvatarVideoService -> Sink

FakeTTS speaks as a streaming TTS does (TTSStartedFrame, 20 ms TTSAudioRawFrame chunks,
TTSStoppedFrame), from a real recording (native/animation/tests/data/utterance_16k.wav):

  1. segment 1: the recording at 16 kHz (the pipeline's rate), paced at real time;
  2. segment 2: the recording resampled to 22.05 kHz (the service announces the new rate), sent at
     once; once it has played for a while the user barges in, as pipecat's user aggregator does it
     (UserStartedSpeakingFrame, then an InterruptionFrame both ways), and stops 300 ms later;
  3. bad input, then segment 3: a chunk of odd byte length (refused: invalid_audio) and one at
     96 kHz (a rate the server refuses), then one second of the recording at 16 kHz, which must
     still play;
  4. segment 4: 0.6 s of the recording with the EndFrame right behind it: the service lets the
     queued speech play out, then closes the socket.

With --bad-key the service is given a key the server refuses: an ErrorFrame goes up, and the TTS
audio and its TTSStoppedFrame pass through unchanged (16 kHz). With --push-idle-audio the silence
between segments comes down too (as SpeechOutputAudioRawFrame).

What was seen goes to stdout as JSON lines, one object each with an "event" key, for
test/integrations/pipecat.test.ts (t: seconds since the script started):

  {"event": "connected", "session": {...}, "frame_size", "frame_rate"}   on_connected (and the
                                                                   service's properties then)
  {"event": "append", "segment_id", "event_id", "t"}               the first append the service sent
                                                                   of each segment id
  {"event": "server", "type": ..., ...}                            each server event but the deltas
  {"event": "server_audio", "pts_ms", "segment_id", "peak", "bytes"}  each response.output_audio.delta
  {"event": "sent", "segment": n, "context_id", "rate", "audio_ms", "t_first", "t_last"}  what FakeTTS pushed
  {"event": "interrupt", "t", "last_pts_ms"}                       the barge-in (last_pts_ms: newest audio pts seen)
  {"event": "image", "pts_ns", "size", "bytes", "format", "t"}     each OutputImageRawFrame at the sink
  {"event": "audio", "pts_ns", "rate", "channels", "bytes", "peak", "context_id", "segment_id", "t", "kind"}
  {"event": "tts_stopped", "context_id", "t", "after_audio_pts_ns"}  a TTSStoppedFrame at the sink
  {"event": "playback_started" | "playback_finished", ...}         the service's event handlers
  {"event": "error", "error": ...}                                 an ErrorFrame that reached the head
  {"event": "disconnected", "t"}                                   on_disconnected
  {"event": "done", "t"} / {"event": "timeout", "waiting_for"} / {"event": "failed", "error"}

Exit status: 0 when the scenario ran to its end and the pipeline ended, 1 on a timeout, 2 when
the scenario raised.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
import wave
from pathlib import Path
from typing import Any

import numpy as np
from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    Frame,
    OutputImageRawFrame,
    SpeechOutputAudioRawFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from avatar_server_pipecat import AvatarVideoService

REPO = Path(__file__).resolve().parents[3]
SPEECH_WAV = REPO / "native/animation/tests/data/utterance_16k.wav"
CHUNK_MS = 20
T0 = time.monotonic()


def now() -> float:
    return round(time.monotonic() - T0, 4)


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stdout.flush()


def peak(pcm: bytes) -> int:
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], np.int16)
    return int(np.abs(samples.astype(np.int32)).max()) if samples.size else 0


def load_speech() -> np.ndarray:
    with wave.open(str(SPEECH_WAV)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), np.int16)


def resample(pcm: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    n_out = int(len(pcm) * rate_out / rate_in)
    x = np.arange(n_out) * (rate_in / rate_out)
    return np.interp(x, np.arange(len(pcm)), pcm.astype(np.float64)).round().astype(np.int16)


class WatchedAvatarService(AvatarVideoService):
    """The plugin as shipped, reporting the server events it handles and the segment ids it sends."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.last_audio_pts_ms: int | None = None
        self.appended_ids: set[str] = set()

    async def _send(self, event: dict[str, Any]) -> None:
        if event.get("type") == "output_audio_buffer.append" and event.get("segment_id") not in self.appended_ids:
            self.appended_ids.add(event.get("segment_id"))
            emit("append", segment_id=event.get("segment_id"), event_id=event.get("event_id"), t=now())
        await super()._send(event)

    async def handle_server_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_audio.delta":
            pcm = base64.b64decode(event.get("delta") or "")
            self.last_audio_pts_ms = event.get("pts_ms")
            emit("server_audio", pts_ms=event.get("pts_ms"), segment_id=event.get("segment_id"), peak=peak(pcm), bytes=len(pcm))
        elif kind == "response.output_image.delta":
            pass  # the sink reports the frames
        else:
            fields = {k: v for k, v in event.items() if k not in ("type", "session")}
            emit("server", type=kind, t=now(), **fields)
        await super().handle_server_event(event)


class FakeTTS(FrameProcessor):
    """Passes frames on; the driver makes it speak. ErrorFrames coming up stop here and are reported."""

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, ErrorFrame) and direction == FrameDirection.UPSTREAM:
            emit("error", error=frame.error, t=now())
        await self.push_frame(frame, direction)

    async def speak(self, n: int, context_id: str, pcm: np.ndarray, rate: int, pace: float | None) -> None:
        """One TTS segment: started, 20 ms chunks (each `pace` seconds apart, or at once), stopped."""
        await self.push_frame(TTSStartedFrame(context_id=context_id))
        step = rate * CHUNK_MS // 1000
        t_first = None
        start = time.monotonic()
        for n_chunk, i in enumerate(range(0, len(pcm), step)):
            chunk = pcm[i : i + step].tobytes()
            await self.push_frame(TTSAudioRawFrame(audio=chunk, sample_rate=rate, num_channels=1, context_id=context_id))
            if t_first is None:
                t_first = now()
            if pace:
                # Real time on average: each chunk when its predecessors' audio has been spoken.
                await asyncio.sleep(max(0.0, start + (n_chunk + 1) * pace - time.monotonic()))
        emit("sent", segment=n, context_id=context_id, rate=rate, audio_ms=round(len(pcm) / rate * 1000), t_first=t_first, t_last=now())
        await self.push_frame(TTSStoppedFrame(context_id=context_id))


class Sink(FrameProcessor):
    """The end of the pipeline: reports what the avatar service pushed downstream."""

    def __init__(self):
        super().__init__(name="sink")
        self.started = asyncio.Event()
        self.last_audio_pts_ns: int | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            if isinstance(frame, StartFrame):
                self.started.set()
            elif isinstance(frame, OutputImageRawFrame):
                emit("image", pts_ns=frame.pts, size=list(frame.size), bytes=len(frame.image), format=frame.format, t=now())
            elif isinstance(frame, (TTSAudioRawFrame, SpeechOutputAudioRawFrame)):
                self.last_audio_pts_ns = frame.pts
                emit(
                    "audio",
                    kind=type(frame).__name__,
                    pts_ns=frame.pts,
                    rate=frame.sample_rate,
                    channels=frame.num_channels,
                    bytes=len(frame.audio),
                    peak=peak(frame.audio),
                    context_id=getattr(frame, "context_id", None),
                    segment_id=frame.metadata.get("avatar_segment_id"),
                    t=now(),
                )
            elif isinstance(frame, TTSStoppedFrame):
                emit("tts_stopped", context_id=frame.context_id, t=now(), after_audio_pts_ns=self.last_audio_pts_ns)
        await self.push_frame(frame, direction)


async def wait_for(what: str, event: asyncio.Event, timeout: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        emit("timeout", waiting_for=what, t=now())
        raise


async def scenario(args: argparse.Namespace, tts: FakeTTS, avatar: WatchedAvatarService, sink: Sink, worker: PipelineWorker) -> None:
    connected = asyncio.Event()
    started: dict[str, asyncio.Event] = {}
    finished: dict[str, asyncio.Event] = {}
    order: list[str] = []  # server segment ids in the order they started or finished

    def segment_event(table: dict[str, asyncio.Event], segment_id: str) -> asyncio.Event:
        if segment_id not in order:
            order.append(segment_id)
        return table.setdefault(segment_id, asyncio.Event())

    @avatar.event_handler("on_connected")
    async def on_connected(service, session):
        emit("connected", session=session, frame_size=service.frame_size, frame_rate=service.frame_rate, t=now())
        connected.set()

    @avatar.event_handler("on_disconnected")
    async def on_disconnected(service):
        emit("disconnected", t=now())

    @avatar.event_handler("on_playback_started")
    async def on_playback_started(service, segment_id, pts_ms):
        emit("playback_started", segment_id=segment_id, pts_ms=pts_ms, t=now())
        segment_event(started, segment_id).set()

    @avatar.event_handler("on_playback_finished")
    async def on_playback_finished(service, segment_id, played_ms, interrupted):
        emit("playback_finished", segment_id=segment_id, played_ms=played_ms, interrupted=interrupted, t=now())
        segment_event(finished, segment_id).set()

    async def nth_segment(n: int, table: dict[str, asyncio.Event], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(order) < n or order[n - 1] not in table:
            if time.monotonic() > deadline:
                emit("timeout", waiting_for=f"segment {n} {what}", t=now())
                raise asyncio.TimeoutError
            await asyncio.sleep(0.01)
        await wait_for(f"segment {n} {what}", table[order[n - 1]], max(0.1, deadline - time.monotonic()))

    await wait_for("the pipeline to start", sink.started, 30)
    await wait_for("on_connected", connected, 30)

    speech = load_speech()
    # 1: at the pipeline's rate, paced like a streaming TTS.
    await tts.speak(1, "ctx-1", speech, 16000, CHUNK_MS / 1000)
    # 2: another rate, all at once (queued behind segment 1 on the server).
    await tts.speak(2, "ctx-2", resample(speech, 16000, 22050), 22050, None)
    await nth_segment(2, started, "started", 15)
    await asyncio.sleep(args.interrupt_after)
    emit("interrupt", t=now(), last_pts_ms=avatar.last_audio_pts_ms)
    await tts.broadcast_frame(UserStartedSpeakingFrame)
    await tts.broadcast_interruption()
    await asyncio.sleep(0.3)
    await tts.broadcast_frame(UserStoppedSpeakingFrame)
    await nth_segment(2, finished, "finished", 5)

    # 3: bad input first, then speech that must still play.
    await tts.push_frame(TTSStartedFrame(context_id="ctx-3"))
    await tts.push_frame(TTSAudioRawFrame(audio=speech[:320].tobytes() + b"\x00", sample_rate=16000, num_channels=1, context_id="ctx-3"))
    await tts.push_frame(TTSAudioRawFrame(audio=resample(speech[:320], 16000, 96000).tobytes(), sample_rate=96000, num_channels=1, context_id="ctx-3"))
    emit("bad_input_sent", t=now())
    await tts.speak(3, "ctx-3", speech[:16000], 16000, None)
    await nth_segment(3, finished, "finished", 15)
    await asyncio.sleep(0.5)  # some idle frames
    # 4: the agent's last words, the EndFrame right behind them: they play out before the close.
    await tts.speak(4, "ctx-4", speech[:9600], 16000, None)
    emit("ending", t=now())
    await worker.queue_frame(EndFrame())


async def bad_key(args: argparse.Namespace, tts: FakeTTS, avatar: WatchedAvatarService, sink: Sink, worker: PipelineWorker) -> None:
    """The server refuses the key: an ErrorFrame, and the TTS audio passes through unchanged."""
    await wait_for("the pipeline to start", sink.started, 30)
    await tts.speak(1, "ctx-1", load_speech()[:8000], 16000, None)
    await asyncio.sleep(0.3)
    emit("ending", t=now())
    await worker.queue_frame(EndFrame())


async def run(args: argparse.Namespace) -> int:
    tts = FakeTTS(name="fake-tts")
    avatar = WatchedAvatarService(
        api_key="not-a-key" if args.bad_key else args.key,
        base_url=args.url,
        video_format=args.video_format,
        push_idle_audio=args.push_idle_audio,
    )
    sink = Sink()
    worker = PipelineWorker(Pipeline([tts, avatar, sink]), params=PipelineParams(audio_out_sample_rate=16000), idle_timeout_secs=None)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    code = 0
    try:
        await asyncio.wait_for((bad_key if args.bad_key else scenario)(args, tts, avatar, sink, worker), args.timeout)
        await asyncio.wait_for(running, 20)
        emit("done", t=now())
    except asyncio.TimeoutError:
        code = 1
    except Exception as e:
        emit("failed", error=repr(e), t=now())
        code = 2
    if not running.done():
        await worker.cancel()
        try:
            await asyncio.wait_for(running, 10)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server, http://127.0.0.1:PORT")
    parser.add_argument("--key", required=True)
    parser.add_argument("--video-format", choices=["jpeg", "i420"], default="jpeg")
    parser.add_argument("--push-idle-audio", action="store_true", help="the service's push_idle_audio option")
    parser.add_argument("--bad-key", action="store_true", help="connect with a key the server refuses (another scenario)")
    parser.add_argument("--interrupt-after", type=float, default=0.8, help="seconds of segment 2 played before the barge-in")
    parser.add_argument("--timeout", type=float, default=60.0)
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
