"""The avatar server's avatar-only WebSocket session as a LiveKit `VideoGenerator`.

`AvatarServerVideoGenerator` opens `/v1/realtime?intent=avatar`, sends the agent's speech as
`output_audio_buffer.append` the moment each frame arrives, ends a segment with
`output_audio_buffer.commit` and cuts it with `output_audio_buffer.clear`. What it iterates is
what the server played: `rtc.VideoFrame`s (I420 straight from the binary messages, or decoded
JPEG) and `rtc.AudioFrame`s (24 kHz mono, silence included, on the frames' clock), plus an
`AudioSegmentEnd` when a segment has finished.

It also emits, from the server's `output_audio_buffer.started` / `stopped`:

- ``"playback_started"`` (`PlaybackStarted`): the first sample of one of the agent's segments
  is playing;
- ``"playback_finished"`` (`PlaybackFinished`): that segment played out (``interrupted`` False)
  or was cut by a clear; ``playback_position`` is how much of it was heard, in seconds.

Exactly one of each per segment the agent pushed (a ``playback_started`` only if it was heard
at all), in order, which is what LiveKit's `AudioOutput` counts.

Segment ids: each of the agent's segments (the frames between two `AudioSegmentEnd`s) is named
here when it opens (``livekit_seg_1``, ``livekit_seg_2``, ...), and every append of it carries
that name as ``segment_id``. The server names the segment an append opens after it and ignores
the name on appends that join the open one, so its events, its played audio and its frames name
the agent's segments by these ids, and the generator finds a segment by its id: nothing depends
on the order in which the server mentions them. See docs/avatar-mode.md in the avatar server's
repository for the protocol.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import os
import struct
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

import aiohttp
import numpy as np
from livekit import rtc
from livekit.agents.voice.avatar import AudioSegmentEnd, VideoGenerator

logger = logging.getLogger("avatar_server_livekit")

VideoFormat = Literal["i420", "jpeg"]

#: The played audio the server sends back: PCM16 mono at 24 kHz.
OUTPUT_SAMPLE_RATE = 24000
#: What the server takes as `audio/pcm` input; other rates are resampled here first.
MIN_INPUT_RATE = 8000
MAX_INPUT_RATE = 48000

_I420_HEADER = struct.Struct("<4sIHHIQ")  # magic, frame index, width, height, reserved, pts ns


class AvatarServerError(Exception):
    """The server refused the session or closed it."""


class AvatarVideoFrame(rtc.VideoFrame):
    """An `rtc.VideoFrame` that also says where it sits on the session clock."""

    def __init__(
        self,
        width: int,
        height: int,
        type: int,
        data: bytes | bytearray | memoryview,
        *,
        pts_ms: float,
        frame_index: int,
        segment_id: str | None = None,
    ) -> None:
        super().__init__(width, height, type, data)  # type: ignore[arg-type]
        #: ms since the session's first frame; the audio frame with the same pts goes with it
        self.pts_ms = pts_ms
        self.frame_index = frame_index
        #: the segment being spoken (JPEG frames only; the I420 header does not carry it)
        self.segment_id = segment_id


@dataclass
class PlaybackStarted:
    #: the agent's segment (the ``segment_id`` its appends carried)
    segment_id: str
    #: the server's session clock at the segment's first sample
    pts_ms: float
    #: local wall clock (time.time()) when the event arrived
    created_at: float


@dataclass
class PlaybackFinished:
    #: the agent's segment (the ``segment_id`` its appends carried)
    segment_id: str
    #: seconds of it that were heard
    playback_position: float
    interrupted: bool


@dataclass
class _Segment:
    """One segment of the agent's speech: the frames pushed between two AudioSegmentEnds.

    Every append of it carries ``id``, not just the first: the server reads the name only on the
    append that opens a segment, which is then whichever of them it accepts first (one before it
    may have been refused), or the first after it ended the segment by itself (below).
    """

    id: str
    pushed_s: float = 0.0
    sent: bool = False  # an append of it has been sent
    #: the commit sent at its AudioSegmentEnd (an error naming it is that commit's commit_empty)
    commit_event_id: str | None = None
    #: The server answered the commit with `committed`: from then on a `stopped` of this id is
    #: the segment's last. (A `commit_empty` answer finishes the segment at once.)
    commit_answered: bool = False
    #: What the server reported heard of it so far. More than one `stopped` can name it: the
    #: server ends an open segment by itself once its audio ran out 10 s before, and the next
    #: append (with the same id) opens a new one under the same name; the agent's segment goes on.
    played_ms: float = 0.0
    started: bool = False


_CLOSED = object()


def realtime_url(
    base_url: str, *, video_format: VideoFormat = "i420", session_id: str | None = None
) -> str:
    """`http(s)://host[:port][/prefix]` or `ws(s)://…` → the avatar-only realtime WebSocket URL.

    The video format is chosen there: it decides which encoder the session's media plane runs, so
    the server fixes it when the session opens.
    """
    parts = urlsplit(base_url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"base_url must be http(s):// or ws(s)://, got {base_url!r}")
    path = parts.path
    if not path.endswith("/v1/realtime"):
        path = path.removesuffix("/v1") + "/v1/realtime"
    query = {"intent": "avatar", "video_format": video_format}
    if session_id:
        query["session_id"] = session_id
    return urlunsplit((scheme, parts.netloc, path, urlencode(query), ""))


class AvatarServerVideoGenerator(
    VideoGenerator,
    rtc.EventEmitter[Literal["playback_started", "playback_finished", "cleared", "server_event"]],
):
    """One avatar-only session of the avatar server, driven by LiveKit's `AvatarRunner`.

    Call `connect()` first: it opens the session, whose session object gives `video_width`,
    `video_height` and `video_fps` for `AvatarOptions` before any frame has come.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        face: str | None = None,
        driving: str | None = None,
        video_format: VideoFormat = "i420",
        session_id: str | None = None,
        http_session: aiohttp.ClientSession | None = None,
        connect_timeout: float = 15.0,
        max_delay_ms: float = 250.0,
    ) -> None:
        VideoGenerator.__init__(self)
        rtc.EventEmitter.__init__(self)
        base_url = base_url or os.environ.get("AVATAR_SERVER_URL")
        api_key = api_key or os.environ.get("AVATAR_SERVER_API_KEY")
        if not base_url:
            raise ValueError("base_url is required (or set AVATAR_SERVER_URL)")
        if not api_key:
            raise ValueError("api_key is required (or set AVATAR_SERVER_API_KEY)")
        if video_format not in ("i420", "jpeg"):
            raise ValueError(f"video_format must be 'i420' or 'jpeg', got {video_format!r}")
        self._url = realtime_url(base_url, video_format=video_format, session_id=session_id)
        self._api_key = api_key
        self._face = face
        self._driving = driving
        self._video_format: VideoFormat = video_format
        self._http = http_session
        self._own_http = http_session is None
        self._connect_timeout = connect_timeout
        self._max_delay_ms = max_delay_ms

        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._recv_task: asyncio.Task[None] | None = None
        self._send_task: asyncio.Task[None] | None = None
        self._outbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._closed = False
        self.session: dict[str, Any] = {}

        # what the iterator hands out
        self._out: deque[Any] = deque()
        self._out_ready = asyncio.Event()
        self.skipped_video = 0
        self.skipped_audio = 0
        self._skipping = False

        # the agent's segments by id, in the order they were opened, until each has finished
        self._segments: dict[str, _Segment] = {}
        self._open: _Segment | None = None
        self._segment_numbers = itertools.count(1)
        # for each clear sent and not answered yet, the segments it cuts
        self._clears: deque[list[_Segment]] = deque()
        self._input_rate: int | None = None
        self._resampler: rtc.AudioResampler | None = None
        self._resampler_rate: int | None = None
        self._listening: bool | None = None

        # the session's frame size and rate (its session object's `video`), set by connect()
        self.video_width = 0
        self.video_height = 0
        self.video_fps = 0.0
        #: the newest pts the server sent (audio or frame)
        self.last_pts_ms = 0.0

    # -- session ---------------------------------------------------------------------------

    @property
    def audio_sample_rate(self) -> int:
        return OUTPUT_SAMPLE_RATE

    @property
    def video_format(self) -> VideoFormat:
        return self._video_format

    async def connect(self) -> None:
        """Opens the session and sets it up; its frame size and rate are known on return."""
        if self._http is None:
            self._http = aiohttp.ClientSession()
        try:
            try:
                self._ws = await asyncio.wait_for(
                    self._http.ws_connect(
                        self._url,
                        headers={"Authorization": f"Bearer {self._api_key}"},
                        max_msg_size=0,
                        heartbeat=None,
                    ),
                    self._connect_timeout,
                )
            except aiohttp.WSServerHandshakeError as e:
                raise AvatarServerError(
                    f"avatar server refused the session: HTTP {e.status} {e.message}"
                ) from e
            created = await self._receive_json_until(("session.created",))
            self.session = created.get("session", {})
            # The frames' size and rate are fixed when the session opens (read-only fields).
            video = self.session.get("video") or {}
            try:
                self.video_width = int(video["width"])
                self.video_height = int(video["height"])
                self.video_fps = float(video["fps"])
            except (KeyError, TypeError, ValueError):
                raise AvatarServerError(
                    f"the avatar server's session has no frame size and rate ({video!r}): "
                    "it predates session.video.width/height/fps"
                ) from None
            update: dict[str, Any] = {
                "type": "avatar",
                "output_modalities": ["audio", "image"],
            }
            if self._face:
                update["face"] = self._face
            if self._driving:
                update["driving"] = self._driving
            await self._ws.send_str(json.dumps({"type": "session.update", "session": update}))
            updated = await self._receive_json_until(("session.updated",))
            self.session = updated.get("session", self.session)
        except BaseException:
            await self.aclose()
            raise
        self._recv_task = asyncio.create_task(self._receive_loop(), name="avatar-server-recv")
        self._send_task = asyncio.create_task(self._send_loop(), name="avatar-server-send")
        logger.debug(
            "avatar session open",
            extra={
                "session_id": self.session.get("id"),
                "video": f"{self.video_width}x{self.video_height}@{self.video_fps:g}",
            },
        )

    async def _receive_json_until(self, types: tuple[str, ...]) -> dict[str, Any]:
        """During connect(): the next text event of one of `types` (binary frames are skipped)."""
        assert self._ws is not None
        while True:
            msg = await asyncio.wait_for(self._ws.receive(), self._connect_timeout)
            if msg.type == aiohttp.WSMsgType.TEXT:
                event = json.loads(msg.data)
                if event.get("type") == "error":
                    raise AvatarServerError(
                        f"avatar server refused the session: {event.get('error')}"
                    )
                if event.get("type") in types:
                    return event
            elif msg.type == aiohttp.WSMsgType.BINARY:
                continue
            else:
                raise AvatarServerError(
                    f"avatar server closed the connection ({msg.type.name}, {self._ws.close_code})"
                )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._outbox.put_nowait(None)
        for task in (self._send_task, self._recv_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        for task in (self._send_task, self._recv_task):
            if task is not None and task is not asyncio.current_task():
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._own_http and self._http is not None:
            await self._http.close()
        self._finish_all_after_disconnect()
        self._push_out(_CLOSED)

    # -- VideoGenerator: in ------------------------------------------------------------------

    async def push_audio(self, frame: rtc.AudioFrame | AudioSegmentEnd) -> None:
        if isinstance(frame, AudioSegmentEnd):
            seg = self._open
            if seg is None:
                return
            self._open = None
            if self._closed or not seg.sent:
                # nothing reached the server: with no server, as if it had played; else nothing did
                self._finish(seg, seg.pushed_s * 1000 if self._closed else 0.0, interrupted=False)
                return
            seg.commit_event_id = f"evt_commit_{seg.id}"
            self._send({"type": "output_audio_buffer.commit", "event_id": seg.commit_event_id})
            return

        if self._open is None:
            self._open = _Segment(id=f"livekit_seg_{next(self._segment_numbers)}")
            self._segments[self._open.id] = self._open
        self._open.pushed_s += frame.duration
        if self._closed:
            return
        pcm, rate = self._to_mono_pcm16(frame)
        if not pcm:
            return
        if rate != self._input_rate:
            self._input_rate = rate
            self._send(
                {
                    "type": "session.update",
                    "session": {
                        "type": "avatar",
                        "audio": {"input": {"format": {"type": "audio/pcm", "rate": rate}}},
                    },
                }
            )
        self._open.sent = True
        self._send(
            {
                "type": "output_audio_buffer.append",
                "segment_id": self._open.id,
                "audio": base64.b64encode(pcm).decode("ascii"),
            }
        )

    def clear_buffer(self) -> None:
        """Barge-in: the server drops what is queued and closes the mouth from its next frame.

        Every segment not finished yet is reported by ``playback_finished`` with
        ``interrupted=True`` when the server says how much of it was heard.
        """
        self._open = None
        if self._closed:
            self._finish_all_after_disconnect()
            self.emit("cleared", 0.0)
            return
        # The server reports every segment it cut before it answers; those it never had (their
        # frames never reached it) are finished when it answers (see "cleared" in _on_event).
        self._clears.append(list(self._segments.values()))
        self._send({"type": "output_audio_buffer.clear"})

    def set_listening(self, listening: bool) -> None:
        """`avatar.listen`: the user is speaking (the face listens) or has stopped."""
        if self._closed or listening == self._listening:
            return
        self._listening = listening
        self._send({"type": "avatar.listen", "listening": listening})

    def update_session(self, session: dict[str, Any]) -> None:
        """Sends a `session.update` (e.g. another face); it takes effect at the next frame."""
        self._send({"type": "session.update", "session": {"type": "avatar", **session}})

    @property
    def unfinished_segments(self) -> int:
        """The agent's segments pushed here whose playback has not been reported finished."""
        return len(self._segments)

    def _to_mono_pcm16(self, frame: rtc.AudioFrame) -> tuple[bytes, int]:
        if MIN_INPUT_RATE <= frame.sample_rate <= MAX_INPUT_RATE:
            self._resampler = None
        else:
            if self._resampler is None or self._resampler_rate != frame.sample_rate:
                self._resampler = rtc.AudioResampler(
                    frame.sample_rate, OUTPUT_SAMPLE_RATE, num_channels=frame.num_channels
                )
                self._resampler_rate = frame.sample_rate
            frames = self._resampler.push(frame)
            if not frames:
                return b"", OUTPUT_SAMPLE_RATE
            frame = rtc.combine_audio_frames(frames)
        samples = np.frombuffer(frame.data, dtype=np.int16)
        if frame.num_channels > 1:
            samples = samples.reshape(-1, frame.num_channels).mean(axis=1).round().astype(np.int16)
        return samples.astype("<i2", copy=False).tobytes(), frame.sample_rate

    def _send(self, event: dict[str, Any]) -> None:
        self._outbox.put_nowait(json.dumps(event))

    async def _send_loop(self) -> None:
        assert self._ws is not None
        try:
            while True:
                text = await self._outbox.get()
                if text is None:
                    return
                await self._ws.send_str(text)
        except (ConnectionError, aiohttp.ClientError, RuntimeError) as e:
            logger.error("sending to the avatar server failed: %s", e)
            asyncio.create_task(self.aclose())

    # -- VideoGenerator: out -----------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[rtc.VideoFrame | rtc.AudioFrame | AudioSegmentEnd]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[rtc.VideoFrame | rtc.AudioFrame | AudioSegmentEnd]:
        while True:
            while not self._out:
                self._out_ready.clear()
                await self._out_ready.wait()
            item = self._out.popleft()
            if item is _CLOSED:
                return
            if self._too_late(item):
                continue
            yield item

    def _too_late(self, item: Any) -> bool:
        """Whether `item` is over max_delay_ms behind the newest the server sent.

        The server sends in real time and AvatarRunner forwards at the same rate (its
        AVSynchronizer paces frames), so whatever piles up while the runner waits (it publishes
        its tracks after the first frame and waits for a subscriber) would stay as a lasting
        delay: it is skipped instead, audio and frames alike, to stay in sync.
        """
        if isinstance(item, AvatarVideoFrame):
            pts = item.pts_ms
        elif isinstance(item, rtc.AudioFrame):
            pts = item.userdata.get("pts_ms")
        else:
            return False
        if pts is None or self.last_pts_ms - pts <= self._max_delay_ms:
            if self._skipping:
                self._skipping = False
                logger.info(
                    "caught up with the avatar: %d frames and %d audio frames skipped so far",
                    self.skipped_video,
                    self.skipped_audio,
                )
            return False
        self._skipping = True
        if isinstance(item, AvatarVideoFrame):
            self.skipped_video += 1
        else:
            self.skipped_audio += 1
        return True

    def _push_out(self, item: Any) -> None:
        self._out.append(item)
        self._out_ready.set()

    async def _receive_loop(self) -> None:
        assert self._ws is not None
        try:
            async for msg in self._ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    self._on_binary(msg.data)
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    self._on_event(json.loads(msg.data))
                elif msg.type == aiohttp.WSMsgType.ERROR:
                    break
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("avatar server connection failed")
        if not self._closed:
            logger.error(
                "the avatar server closed the session (code %s)",
                self._ws.close_code if self._ws else None,
            )
            asyncio.create_task(self.aclose())

    def _on_binary(self, data: bytes) -> None:
        if len(data) < _I420_HEADER.size:
            return
        magic, index, width, height, _reserved, pts_ns = _I420_HEADER.unpack_from(data, 0)
        if magic != b"I420":
            logger.warning("unknown binary message from the avatar server (%r)", magic)
            return
        if len(data) < _I420_HEADER.size + width * height * 3 // 2:
            logger.warning("short I420 frame %d (%d bytes)", index, len(data))
            return
        frame = AvatarVideoFrame(
            width,
            height,
            rtc.VideoBufferType.I420,
            memoryview(data)[_I420_HEADER.size : _I420_HEADER.size + width * height * 3 // 2],
            pts_ms=pts_ns / 1e6,
            frame_index=index,
        )
        self._on_video(frame)

    def _on_video(self, frame: AvatarVideoFrame) -> None:
        self.last_pts_ms = max(self.last_pts_ms, frame.pts_ms)
        self._push_out(frame)

    def _on_jpeg(self, event: dict[str, Any]) -> None:
        from io import BytesIO

        from PIL import Image  # the `jpeg` extra

        with Image.open(BytesIO(base64.b64decode(event["delta"]))) as img:
            rgba = img.convert("RGBA")
        frame = AvatarVideoFrame(
            rgba.width,
            rgba.height,
            rtc.VideoBufferType.RGBA,
            rgba.tobytes(),
            pts_ms=float(event.get("pts_ms", 0.0)),
            frame_index=int(event.get("frame_index", 0)),
            segment_id=event.get("segment_id"),
        )
        self._on_video(frame)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self._events.get("server_event"):
            self.emit("server_event", event)
        if kind == "response.output_audio.delta":
            pcm = base64.b64decode(event["delta"])
            samples = len(pcm) // 2
            if samples:
                pts_ms = float(event.get("pts_ms", 0.0))
                self.last_pts_ms = max(self.last_pts_ms, pts_ms)
                self._push_out(
                    rtc.AudioFrame(
                        pcm[: samples * 2],
                        OUTPUT_SAMPLE_RATE,
                        1,
                        samples,
                        userdata={"pts_ms": pts_ms, "segment_id": event.get("segment_id")},
                    )
                )
        elif kind == "response.output_image.delta":
            self._on_jpeg(event)
        elif kind == "output_audio_buffer.started":
            seg = self._segments.get(event.get("segment_id"))
            if seg is not None and not seg.started:  # (again after an auto-end: not reported)
                seg.started = True
                self.emit(
                    "playback_started",
                    PlaybackStarted(
                        segment_id=seg.id,
                        pts_ms=float(event.get("pts_ms", 0.0)),
                        created_at=time.time(),
                    ),
                )
        elif kind == "output_audio_buffer.committed":
            seg = self._segments.get(event.get("segment_id"))
            if seg is not None:
                seg.commit_answered = True
        elif kind == "output_audio_buffer.stopped":
            seg = self._segments.get(event.get("segment_id"))
            if seg is None:
                return
            seg.played_ms += float(event.get("played_ms", 0.0))
            if event.get("interrupted") or seg.commit_answered:
                self._finish(seg, seg.played_ms, interrupted=bool(event.get("interrupted")))
            # else the server ended it by itself (its audio ran out 10 s before a commit): the
            # agent's segment goes on under the same name with its next append, or ends with
            # its commit (committed, then stopped; or commit_empty if nothing was appended)
        elif kind == "output_audio_buffer.cleared":
            # Every segment the server cut has had its stopped; what this clear cut and is still
            # here never reached the server (or had ended by itself before the clear).
            for seg in self._clears.popleft() if self._clears else []:
                self._finish(seg, seg.played_ms, interrupted=True)
            self.emit("cleared", float(event.get("played_ms", 0.0)) / 1000)
        elif kind == "error":
            error = event.get("error") or {}
            code = error.get("code")
            if code == "output_audio_buffer_commit_empty":
                # A commit with no open segment: every append of it was refused, or the server
                # had ended it by itself and nothing came after; either way it is over.
                for seg in list(self._segments.values()):
                    if seg.commit_event_id == error.get("event_id"):
                        self._finish(seg, seg.played_ms, interrupted=False)
                return
            logger.warning("avatar server: %s: %s", code, error.get("message"))

    def _finish(self, seg: _Segment, played_ms: float, *, interrupted: bool) -> None:
        """Reports the agent's segment finished, once (a segment already finished is ignored)."""
        if self._segments.pop(seg.id, None) is None:
            return
        if self._open is seg:
            self._open = None
        self.emit(
            "playback_finished",
            PlaybackFinished(
                segment_id=seg.id,
                playback_position=max(0.0, played_ms) / 1000,
                interrupted=interrupted,
            ),
        )
        self._push_out(AudioSegmentEnd())

    def _finish_all_after_disconnect(self) -> None:
        """With no server to say so, every segment is finished now so that nothing waits on it.

        The open one is finished by its AudioSegmentEnd (see push_audio)."""
        for seg in list(self._segments.values()):
            if seg is not self._open:
                self._finish(seg, seg.played_ms, interrupted=True)
