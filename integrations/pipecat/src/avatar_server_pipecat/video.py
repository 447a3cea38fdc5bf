"""AvatarVideoService: the avatar server's face for a pipecat pipeline.

Placed right after the TTS service. The TTS audio goes to the server's avatar-only session
(``/v1/realtime?intent=avatar``, docs/avatar-mode.md) as it comes; what comes back, the played
audio and the rendered frames on one clock, is pushed downstream in its place::

    ... -> tts -> AvatarVideoService -> transport.output() -> ...

    TTSAudioRawFrame ──▶ output_audio_buffer.append   (swallowed; sent at once, never batched;
                         segment_id: the service's name for the segment, see below)
    TTSStoppedFrame  ──▶ output_audio_buffer.commit   (the frame itself is held: see below)
    InterruptionFrame ─▶ output_audio_buffer.clear
    UserStarted/StoppedSpeakingFrame ─▶ avatar.listen {listening}
    a TTS sample rate the session was not told of ─▶ session.update (audio.input.format.rate)

    response.output_audio.delta  ──▶ TTSAudioRawFrame(24 kHz mono, pts)   (a segment's audio)
    response.output_image.delta / binary I420 ──▶ OutputImageRawFrame(RGB, pts)
    output_audio_buffer.started  ──▶ on_playback_started(segment_id, pts_ms)
    output_audio_buffer.stopped  ──▶ the held TTSStoppedFrame, on_playback_finished(segment_id,
                                     played_ms, interrupted)
    error ──▶ ErrorFrame upstream (not fatal: the session goes on)

Why the TTSStoppedFrame is held: the output transport reads it as "the bot stopped speaking".
Passed on at once it would reach the transport while the avatar is still saying the segment,
so the transport would report the bot stopped, then started again on the next played chunk.
It is pushed after the segment's last played audio instead (and dropped for a segment an
interruption cut: the InterruptionFrame already told everyone).

Idle audio: the server sends audio for every frame interval, silence included. By default only
a segment's audio is pushed (``push_idle_audio=False``): pipecat's output transports need no
continuous audio (they pace what they are given, and a WebRTC track sends silence by itself),
the transport's "bot speaking" state follows the segments exactly, and a transport whose clock
runs slower than the server's gets its audio queue emptied between turns instead of falling
further behind. With ``push_idle_audio=True`` the idle silence is pushed too, as
SpeechOutputAudioRawFrame (the transport judges those by their loudness, so silence does not
count as the bot speaking): for a recorder that wants one unbroken track.

Segments are named here: the first append after a commit or a clear opens a segment on the
server, and the service names it (``pipecat_seg_1``, ``pipecat_seg_2``, ...) by giving every append
of it that ``segment_id``. The server takes the name from the append that opens the segment
(whichever it accepts first: an earlier one may have been refused) and ignores it on those that
join it, so its events, its played audio and its frames name the segments by the service's ids,
and each event is matched to its segment by id. A segment the server ended by itself (no audio
for 10 s before the commit) is reopened under the same name by the next append, and stays one
segment here: started once, finished once, when the server has answered the commit.

Frames are pushed for every rendered frame, idle or speaking, so a transport should show them as
they come: ``video_out_is_live=True`` with the server's frame rate and size (this package's README). The session
object gives both when the session opens (``frame_size``, ``frame_rate``), before any frame.

When the server cannot be reached, or the connection drops, an ErrorFrame goes upstream and the
TTS audio passes through unchanged, so the agent is still heard.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np
from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    OutputImageRawFrame,
    SpeechOutputAudioRawFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.ai_service import AIService
from pipecat.services.settings import ServiceSettings
from pipecat.utils.errors import ErrorCategory
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .convert import i420_to_rgb, jpeg_to_rgb, parse_i420_header, I420_HEADER

#: The played audio the server sends back: PCM16 mono at 24 kHz (the only PCM rate it sends).
OUTPUT_SAMPLE_RATE = 24000
#: PCM rates the server resamples from.
MIN_INPUT_RATE, MAX_INPUT_RATE = 8000, 48000
#: How long an answer to session.update may take before the service gives up waiting.
UPDATE_TIMEOUT_S = 5.0

VideoFormat = Literal["jpeg", "i420"]

#: A refusal at connect time, by the server's error type: a bad key stays bad (permanent).
_ERROR_CATEGORIES = {
    "authentication_error": ErrorCategory.AUTHENTICATION,
    "permission_error": ErrorCategory.AUTHORIZATION,
    "invalid_request_error": ErrorCategory.INVALID_REQUEST,
    "not_found_error": ErrorCategory.INVALID_REQUEST,
    "rate_limit_error": ErrorCategory.RATE_LIMIT,
    "server_error": ErrorCategory.SERVER,
}


@dataclass
class _Segment:
    """A segment as this client opened it: the first append after a commit or clear opens one.

    Every append of it carries ``id`` as its ``segment_id``; the server's events name it so.
    """

    id: str
    context_id: str | None
    rate: int
    bytes: int = 0
    #: event_id of the commit that closed it (an error for it means the server had no segment).
    commit_event_id: str | None = None
    #: The server answered that commit (``committed``): its next ``stopped`` is its last.
    commit_answered: bool = False
    #: The server has named it in an event (it opened it; a segment whose every append was
    #: refused, or that a clear cut before any append was sent, it never did).
    on_server: bool = False
    #: Cut by a clear this client sent; the server will report it stopped, interrupted.
    cut: bool = False
    started: bool = False
    #: ms of it heard, from its ``stopped`` events (more than one if the server ended it by itself
    #: and the next append reopened it under the same name).
    played_ms: int = 0
    held_stop: TTSStoppedFrame | None = None

    @property
    def audio_ms(self) -> float:
        return self.bytes / 2 / self.rate * 1000


@dataclass
class _Update:
    event_id: str
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def realtime_url(base_url: str, query: dict[str, str]) -> str:
    """``ws(s)://HOST[:PORT]/v1/realtime?intent=avatar&...`` from an http(s)/ws(s) base URL,
    with or without the ``/v1/realtime`` path."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"base_url {base_url!r}: expected http(s):// or ws(s)://")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/realtime"):
        path += "/v1/realtime"
    return urlunsplit((scheme, parts.netloc, path, urlencode(query), ""))


class AvatarVideoService(AIService):
    """Renders the agent's TTS speech as a talking face on a self-hosted avatar server.

    Event handlers (``@service.event_handler("...")``, each called as ``handler(service, ...)``):

    - ``on_connected(service, session)``: the session is open and configured (its session object).
    - ``on_disconnected(service)``: the connection ended (closed by the service or dropped).
    - ``on_playback_started(service, segment_id, pts_ms)``: a segment's first sample plays.
    - ``on_playback_finished(service, segment_id, played_ms, interrupted)``: once per segment,
      when it played out (``interrupted`` False) or an interruption cut it (``played_ms`` is how
      much of it was heard).
    - ``on_server_error(service, error)``: an ``error`` event (its ``error`` object), also pushed
      upstream as an ErrorFrame.

    ``segment_id`` is the service's name for the segment (``pipecat_seg_<n>``), which the server's
    events and the pushed frames' ``metadata["avatar_segment_id"]`` carry too.
    """

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = "http://127.0.0.1:8080",
        face: str | None = None,
        driving: str | None = None,
        video_format: VideoFormat = "jpeg",
        sample_rate: int | None = None,
        push_idle_audio: bool = False,
        session_id: str | None = None,
        connect_timeout: float = 15.0,
        drain_timeout: float = 30.0,
        **kwargs: Any,
    ):
        """
        Args:
            api_key: An API key of the server (or an ephemeral key of an avatar session).
            base_url: The server, e.g. ``http://127.0.0.1:8080`` or ``wss://avatar.example.com``.
            face: A face id (a standard one or an upload of the key's user); None: the server's.
            driving: A driving (idle motion) id; None: the server's.
            video_format: ``"jpeg"`` (default: the cheaper for this process, about 3 ms of CPU a
                512x512 frame end to end against 5-6 ms for I420, and a tenth of the bytes) or
                ``"i420"`` (raw frames: no JPEG encode on the server, 10 MB/s at 512x512, 25 fps).
            sample_rate: The TTS audio's rate, if known up front (default: the pipeline's
                ``audio_out_sample_rate``). Any other rate is announced when it arrives.
            push_idle_audio: Also push the silence played between segments (see the module doc).
            session_id: Run a REST session made beforehand (its output_size, target_fps).
            connect_timeout: Seconds to wait for the connection and session.created.
            drain_timeout: On EndFrame, the most seconds to wait for queued speech to play out
                before closing (the wait ends as soon as the last segment finishes).
        """
        # No model here: the settings say so, or pipecat's start-time check complains.
        kwargs.setdefault("settings", ServiceSettings(model=None))
        super().__init__(**kwargs)
        if video_format not in ("jpeg", "i420"):
            raise ValueError(f"video_format must be 'jpeg' or 'i420', not {video_format!r}")
        self._api_key = api_key
        self._base_url = base_url
        self._face = face
        self._driving = driving
        self._video_format: VideoFormat = video_format
        self._configured_rate = sample_rate
        self._push_idle_audio = push_idle_audio
        self._session_id = session_id
        self._connect_timeout = connect_timeout
        self._drain_timeout = drain_timeout

        self._ws: ClientConnection | None = None
        self._session: dict[str, Any] | None = None
        self._receive_task: asyncio.Task | None = None
        self._send_task: asyncio.Task | None = None
        self._send_queue: asyncio.Queue | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closing = False
        self._event_ids = itertools.count(1)

        # Sender-side state (the sender task alone changes these, in the order it sends).
        self._input_rate = 24000
        self._refused_rates: set[int] = set()
        self._open: _Segment | None = None
        self._segment_numbers = itertools.count(1)
        #: Segments not finished yet, by id, in the order they were opened.
        self._segments: dict[str, _Segment] = {}
        #: For each clear sent and not answered yet, the segments it cut.
        self._clears: deque[list[_Segment]] = deque()
        #: Bumped by every interruption: queued appends and commits of an older epoch are dropped.
        self._epoch = 0
        self._update: _Update | None = None
        self._all_finished = asyncio.Event()
        self._all_finished.set()

        for name in ("on_connected", "on_disconnected", "on_playback_started", "on_playback_finished", "on_server_error"):
            self._register_event_handler(name)

    # ---- public state ----

    @property
    def connected(self) -> bool:
        return self._ws is not None and self._send_queue is not None and not self._closing

    @property
    def session(self) -> dict[str, Any] | None:
        """The session object of the latest session.created / session.updated."""
        return self._session

    @property
    def frame_size(self) -> tuple[int, int] | None:
        """(width, height) of the frames: the session's (``session["video"]``), known from
        ``on_connected`` on, before the first frame; None before the session opened."""
        video = _video_of(self._session)
        return (int(video["width"]), int(video["height"])) if "width" in video and "height" in video else None

    @property
    def frame_rate(self) -> float | None:
        """Frames per second of the session (``session["video"]["fps"]``), like ``frame_size``."""
        video = _video_of(self._session)
        return float(video["fps"]) if "fps" in video else None

    def can_generate_metrics(self) -> bool:
        return True

    # ---- lifecycle ----

    async def start(self, frame: StartFrame):
        await super().start(frame)
        if self._configured_rate is None:
            self._configured_rate = self.processor_setup.audio_out_sample_rate
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="avatar-frames")
        await self._connect()

    async def stop(self, frame: EndFrame):
        await super().stop(frame)
        await self._drain()
        await self._disconnect()

    async def cancel(self, frame: CancelFrame):
        await super().cancel(frame)
        await self._disconnect()

    async def cleanup(self):
        await super().cleanup()
        await self._disconnect()
        if self._executor:
            self._executor.shutdown(wait=False)
            self._executor = None

    async def _connect(self):
        query = {"intent": "avatar", "video_format": self._video_format}
        if self._session_id:
            query["session_id"] = self._session_id
        url = realtime_url(self._base_url, query)
        try:
            self._ws = await connect(
                url,
                additional_headers={"Authorization": f"Bearer {self._api_key}"},
                # An I420 frame is width*height*1.5 bytes (1.4 MB at 1280x720).
                max_size=16 * 1024 * 1024,
                compression=None,
                open_timeout=self._connect_timeout,
            )
            created = json.loads(await asyncio.wait_for(self._ws.recv(), self._connect_timeout))
            if created.get("type") == "error":
                # Refused after the upgrade (a bad key, no free worker, a bad session_id).
                error = created.get("error") or {}
                await self._abandon_socket()
                await self.push_error(
                    f"{self}: the avatar server refused the session: {error.get('code')}: {error.get('message')}",
                    category=_ERROR_CATEGORIES.get(error.get("type"), ErrorCategory.UNKNOWN),
                )
                return
            if created.get("type") != "session.created":
                raise RuntimeError(f"expected session.created, got {str(created)[:300]}")
            self._session = created.get("session")
            self._input_rate = _input_rate_of(self._session, self._input_rate)
        except Exception as e:
            await self._abandon_socket()
            await self.push_error(f"{self}: could not open an avatar session at {url}: {e}", exception=e)
            return
        logger.debug(f"{self}: avatar session {self._session.get('id') if self._session else '?'} opened")
        self._closing = False
        self._send_queue = asyncio.Queue()
        self._receive_task = self.create_task(self._receive_loop(), "receive")
        self._send_task = self.create_task(self._send_loop(), "send")
        # The first configuration: answered before anything else goes (one round trip, once).
        session: dict[str, Any] = {
            "type": "avatar",
            "output_modalities": ["audio", "image"],
            "audio": {
                "input": {"format": {"type": "audio/pcm", "rate": self._configured_rate}},
                "output": {"format": {"type": "audio/pcm", "rate": OUTPUT_SAMPLE_RATE}},
            },
            "video": {"format": self._video_format},
        }
        assets = {k: v for k, v in (("face", self._face), ("driving", self._driving)) if v is not None}
        answer = await self._session_update({**session, **assets})
        if answer is None and assets and self.connected:
            # Refused (an ErrorFrame says why), most likely a face or driving that does not
            # exist: the rest still applies, with the server's face.
            await self._session_update(session)
        if self.connected:
            await self._call_event_handler("on_connected", self._session)

    async def _drain(self):
        """On EndFrame: the open segment is committed, then what is queued plays out."""
        if not self.connected or not self._send_queue:
            return
        self._send_queue.put_nowait(("commit", None, self._epoch))
        await self._send_queue.join()
        queued_s = sum(s.audio_ms for s in self._segments.values()) / 1000
        try:
            await asyncio.wait_for(self._all_finished.wait(), min(self._drain_timeout, queued_s + 3))
        except asyncio.TimeoutError:
            logger.warning(f"{self}: closing with {len(self._segments)} segment(s) not played out")

    async def _disconnect(self):
        """Closes the socket (if still open) and stops both tasks. Safe to call more than once."""
        self._closing = True
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(), 3)
            except Exception as e:
                logger.debug(f"{self}: closing the avatar socket: {e}")
        for task in (self._send_task, self._receive_task):
            if task and task is not asyncio.current_task():
                await self.cancel_task(task)
        self._send_task = self._receive_task = None
        self._send_queue = None
        self._connection_ended()
        if ws is not None:
            await self._call_event_handler("on_disconnected")

    def _connection_ended(self):
        if self._update and not self._update.future.done():
            self._update.future.set_result(None)
        self._segments.clear()
        self._clears.clear()
        self._open = None
        self._all_finished.set()

    async def _abandon_socket(self):
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(), 2)
            except Exception:
                pass

    # ---- frames from the pipeline ----

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)

        if isinstance(frame, TTSAudioRawFrame) and direction == FrameDirection.DOWNSTREAM:
            if not self.connected:
                await self.push_frame(frame, direction)  # no avatar: the agent is still heard
                return
            audio = frame.audio
            if frame.num_channels == 2:
                pcm = np.frombuffer(audio[: len(audio) // 4 * 4], np.int16).reshape(-1, 2)
                audio = pcm.mean(axis=1).astype(np.int16).tobytes()
            self._send_queue.put_nowait(("append", audio, frame.sample_rate, frame.context_id, self._epoch))
        elif isinstance(frame, TTSStoppedFrame) and direction == FrameDirection.DOWNSTREAM:
            if not self.connected:
                await self.push_frame(frame, direction)
                return
            self._send_queue.put_nowait(("commit", frame, self._epoch))
        elif isinstance(frame, InterruptionFrame):
            if self.connected:
                # Queued appends and commits of the cut speech are not sent at all.
                self._epoch += 1
                self._send_queue.put_nowait(("clear",))
            await self.push_frame(frame, direction)
        elif isinstance(frame, (UserStartedSpeakingFrame, UserStoppedSpeakingFrame)):
            if self.connected:
                self._send_queue.put_nowait(("listen", isinstance(frame, UserStartedSpeakingFrame)))
            await self.push_frame(frame, direction)
        else:
            # StartFrame, EndFrame and CancelFrame too, after start/stop/cancel ran in super().
            await self.push_frame(frame, direction)

    # ---- sending (one task, so the server sees events in the order the pipeline made them) ----

    def _next_event_id(self) -> str:
        return f"evt_pipecat_{next(self._event_ids)}"

    async def _send(self, event: dict[str, Any]) -> None:
        if self._ws is None:
            return
        await self._ws.send(json.dumps(event, separators=(",", ":")))

    async def _send_loop(self):
        queue = self._send_queue
        while True:
            item = await queue.get()
            try:
                await self._send_item(item)
            except ConnectionClosed:
                pass  # the receive loop reports it
            except Exception as e:
                await self.push_error(f"{self}: sending {item[0]} failed: {e}", exception=e)
            finally:
                queue.task_done()

    async def _send_item(self, item: tuple):
        kind = item[0]
        if kind == "append":
            _, audio, rate, context_id, epoch = item
            if epoch != self._epoch or not audio:
                return
            if rate != self._input_rate:
                if rate in self._refused_rates:
                    return
                answer = await self._session_update({"audio": {"input": {"format": {"type": "audio/pcm", "rate": rate}}}})
                if not isinstance(answer, dict):
                    self._refused_rates.add(rate)
                    logger.error(f"{self}: the avatar server refused {rate} Hz; audio at that rate is dropped")
                    return
            segment = self._open
            if segment is None:
                segment = self._open = _Segment(id=f"pipecat_seg_{next(self._segment_numbers)}", context_id=context_id, rate=rate)
                self._segments[segment.id] = segment
                self._all_finished.clear()
                await self.start_ttfb_metrics()
            segment.bytes += len(audio)
            # Every append names its segment: the server reads the name on the one that opens it.
            await self._send({"type": "output_audio_buffer.append", "event_id": self._next_event_id(), "segment_id": segment.id, "audio": base64.b64encode(audio).decode("ascii")})
        elif kind == "commit":
            _, stop_frame, epoch = item
            segment = self._open
            if epoch != self._epoch:
                return  # cut by an interruption: the InterruptionFrame already went down
            if segment is None:
                if stop_frame is not None:
                    await self.push_frame(stop_frame)  # nothing was appended: nothing to wait for
                return
            self._open = None
            segment.held_stop = stop_frame
            segment.commit_event_id = self._next_event_id()
            await self._send({"type": "output_audio_buffer.commit", "event_id": segment.commit_event_id})
        elif kind == "clear":
            self._open = None
            for segment in self._segments.values():
                segment.cut = True
            self._clears.append(list(self._segments.values()))
            await self._send({"type": "output_audio_buffer.clear", "event_id": self._next_event_id()})
        elif kind == "listen":
            await self._send({"type": "avatar.listen", "event_id": self._next_event_id(), "listening": item[1]})

    async def _session_update(self, session: dict[str, Any]) -> dict[str, Any] | None:
        """Sends session.update and waits for its answer: the session object, or None (refused)."""
        update = _Update(self._next_event_id())
        self._update = update
        try:
            await self._send({"type": "session.update", "event_id": update.event_id, "session": session})
            answer = await asyncio.wait_for(update.future, UPDATE_TIMEOUT_S)
        except asyncio.TimeoutError:
            await self.push_error(f"{self}: session.update was not answered in {UPDATE_TIMEOUT_S} s")
            return None
        except ConnectionClosed:
            return None
        finally:
            self._update = None
        if isinstance(answer, dict):
            self._input_rate = _input_rate_of(answer, self._input_rate)
        return answer

    # ---- receiving ----

    async def _receive_loop(self):
        ws = self._ws
        reason = None
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    await self._on_raw_frame(message)
                else:
                    try:
                        event = json.loads(message)
                    except ValueError:
                        logger.warning(f"{self}: a server message that is not JSON: {message[:200]!r}")
                        continue
                    await self.handle_server_event(event)
        except ConnectionClosed as e:
            reason = e
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug here must not leave the pipeline silent without a word
            reason = e
            await self.push_error(f"{self}: receiving from the avatar server failed: {e}", exception=e)
        if not self._closing:
            # Dropped by the server or the network: the TTS audio passes through from now on.
            self._closing = True
            self._ws = None
            self._send_queue = None
            self._connection_ended()
            code = getattr(ws, "close_code", None)
            await self.push_error(f"{self}: the avatar session ended ({reason or f'closed by the server, code {code}'}); TTS audio now passes through")
            await self._call_event_handler("on_disconnected")

    async def handle_server_event(self, event: dict[str, Any]) -> None:
        """One text event from the server. Subclasses may override it to watch them (call super)."""
        kind = event.get("type")
        if kind == "response.output_audio.delta":
            await self._on_audio(event)
        elif kind == "response.output_image.delta":
            await self._on_jpeg(event)
        elif kind == "output_audio_buffer.started":
            segment = self._segments.get(event.get("segment_id"))
            if segment is not None:
                segment.on_server = True
                if not segment.started:  # (not again when the server reopened it)
                    segment.started = True
                    await self.stop_ttfb_metrics()
                    await self._call_event_handler("on_playback_started", segment.id, event.get("pts_ms"))
        elif kind == "output_audio_buffer.stopped":
            await self._on_stopped(event)
        elif kind == "output_audio_buffer.committed":
            segment = self._segments.get(event.get("segment_id"))
            if segment is not None:
                segment.on_server = segment.commit_answered = True
        elif kind == "output_audio_buffer.cleared":
            # The server reported every segment it cut (stopped) before this answer; the others
            # this clear cut it never had (or had ended by itself), so they finish now.
            for segment in self._clears.popleft() if self._clears else []:
                await self._finish(segment, interrupted=True)
        elif kind in ("session.updated", "session.created"):
            self._session = event.get("session")
            if kind == "session.updated" and self._update and not self._update.future.done():
                self._update.future.set_result(self._session)
        elif kind == "error":
            await self._on_error(event.get("error") or {})
        else:
            logger.trace(f"{self}: server event {kind}")

    async def _on_stopped(self, event: dict[str, Any]):
        segment = self._segments.get(event.get("segment_id"))
        if segment is None:
            return  # (not one of this service's segments, or already finished)
        segment.on_server = True
        segment.played_ms += int(event.get("played_ms") or 0)
        interrupted = bool(event.get("interrupted"))
        if interrupted or segment.commit_answered:
            await self._finish(segment, interrupted=interrupted)
        # Else the server ended it by itself (its audio ran out 10 s before a commit): the next
        # append reopens it under the same name, or the commit ends it (committed, then stopped;
        # or commit_empty when nothing came after).

    async def _finish(self, segment: _Segment, *, interrupted: bool) -> None:
        """The segment is over: its held TTSStoppedFrame goes down (unless an interruption cut it)
        and on_playback_finished is called (if the server ever had it). Once per segment."""
        if self._segments.pop(segment.id, None) is None:
            return
        if self._open is segment:
            self._open = None
        if not self._segments:
            self._all_finished.set()
        if segment.held_stop is not None and not interrupted and not segment.cut:
            await self.push_frame(segment.held_stop)
        if segment.on_server:
            await self._call_event_handler("on_playback_finished", segment.id, segment.played_ms, interrupted)

    async def _on_error(self, error: dict[str, Any]):
        event_id = error.get("event_id")
        if self._update and event_id == self._update.event_id and not self._update.future.done():
            self._update.future.set_result(None)
        # A commit with no open segment (commit_empty): the server never opened the segment
        # (every append of it was refused, each with its own error already) or had ended it by
        # itself with nothing appended since. Either way the segment is over, and the answer is
        # no news for the pipeline.
        for segment in list(self._segments.values()):
            if event_id and segment.commit_event_id == event_id:
                await self._finish(segment, interrupted=False)
                if error.get("code") == "output_audio_buffer_commit_empty":
                    logger.debug(f"{self}: {segment.id} had no open segment on the server to commit")
                    return
        await self._call_event_handler("on_server_error", error)
        await self.push_error(f"{self}: avatar server error {error.get('code')}: {error.get('message')} (event {event_id}, param {error.get('param')})")

    async def _on_audio(self, event: dict[str, Any]):
        delta = event.get("delta")
        if not delta:
            return
        audio = base64.b64decode(delta)
        pts_ns = int(event.get("pts_ms", 0)) * 1_000_000
        segment_id = event.get("segment_id")
        if segment_id is None:
            if not self._push_idle_audio:
                return
            frame = SpeechOutputAudioRawFrame(audio=audio, sample_rate=OUTPUT_SAMPLE_RATE, num_channels=1)
        else:
            segment = self._segments.get(segment_id)
            if segment is not None and segment.cut:
                return  # played before the server saw the clear: pipecat already cut the bot off
            frame = TTSAudioRawFrame(
                audio=audio, sample_rate=OUTPUT_SAMPLE_RATE, num_channels=1, context_id=segment.context_id if segment else None
            )
        frame.pts = pts_ns
        frame.metadata["avatar_segment_id"] = segment_id
        await self.push_frame(frame)

    async def _on_jpeg(self, event: dict[str, Any]):
        delta = event.get("delta")
        if not delta:
            return
        jpeg = base64.b64decode(delta)
        rgb, size = await asyncio.get_running_loop().run_in_executor(self._executor, jpeg_to_rgb, jpeg)
        await self._push_image(rgb, size, int(event.get("pts_ms", 0)) * 1_000_000, event.get("frame_index"), event.get("segment_id"))

    async def _on_raw_frame(self, message: bytes):
        try:
            header = parse_i420_header(message)
        except ValueError as e:
            logger.warning(f"{self}: {e}")
            return
        planes = memoryview(message)[I420_HEADER.size :]
        rgb = await asyncio.get_running_loop().run_in_executor(self._executor, i420_to_rgb, planes, header.width, header.height)
        await self._push_image(rgb, (header.width, header.height), header.pts_ns, header.frame_index, None)

    async def _push_image(self, rgb: bytes, size: tuple[int, int], pts_ns: int, frame_index: Any, segment_id: Any):
        if self._closing:
            return
        frame = OutputImageRawFrame(image=rgb, size=size, format="RGB")
        frame.pts = pts_ns
        frame.metadata["avatar_frame_index"] = frame_index
        if segment_id is not None:
            frame.metadata["avatar_segment_id"] = segment_id
        await self.push_frame(frame)


def _video_of(session: dict[str, Any] | None) -> dict[str, Any]:
    video = (session or {}).get("video")
    return video if isinstance(video, dict) else {}


def _input_rate_of(session: dict[str, Any] | None, default: int) -> int:
    try:
        fmt = session["audio"]["input"]["format"]  # type: ignore[index]
        return int(fmt["rate"]) if fmt.get("type") == "audio/pcm" else default
    except (KeyError, TypeError, ValueError):
        return default
