"""`AvatarSession`: the avatar server as a LiveKit Agents avatar, run in the agent's process.

The shape of LiveKit's local avatar plugins: the agent's speech goes into a `QueueAudioOutput`,
an `AvatarRunner` reads it into our `AvatarServerVideoGenerator` (the server's avatar-only
WebSocket session) and publishes what comes back, the played audio and the rendered face, as the
agent's own audio and video tracks. No second participant joins the room.

Playback started / finished, which the agent session uses for its turn state and to cut the
transcript of an interrupted reply, come from the server's `output_audio_buffer.started` /
`stopped` (the moment the first sample is rendered, how many ms of a cut segment were heard)
rather than from what the runner counted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import aiohttp
from livekit import rtc
from livekit.agents.voice.avatar import (
    AvatarOptions,
    AvatarRunner,
    QueueAudioOutput,
)
from livekit.agents.voice.avatar import (
    AvatarSession as _BaseAvatarSession,
)

from .generator import (
    OUTPUT_SAMPLE_RATE,
    AvatarServerVideoGenerator,
    PlaybackFinished,
    PlaybackStarted,
    VideoFormat,
)

if TYPE_CHECKING:
    from livekit.agents import AgentSession
    from livekit.agents.voice.events import UserStateChangedEvent

logger = logging.getLogger("avatar_server_livekit")


class ServerTimedAudioOutput(QueueAudioOutput):
    """A `QueueAudioOutput` whose playback events are the avatar server's.

    `AvatarRunner` reports playback started at the first audio frame it forwards and finished
    with the audio it forwarded; our generator forwards the server's continuous stream, silence
    included, so those counts would be wrong. Its calls are ignored here, and the generator's
    ``playback_started`` / ``playback_finished`` (from `output_audio_buffer.started` / `stopped`)
    are reported instead.
    """

    def __init__(self, generator: AvatarServerVideoGenerator, *, sample_rate: int | None = None):
        # wait_playback_start: "started" when the server plays the first sample, not when the
        # first frame is queued
        super().__init__(sample_rate=sample_rate, wait_playback_start=True)
        self._generator = generator
        self._orphans: list[int] = []
        generator.on("playback_started", self._on_server_started)
        generator.on("playback_finished", self._on_server_finished)
        generator.on("cleared", self._on_server_cleared)

    def notify_playback_started(self) -> None:
        pass  # the runner's guess; see _on_server_started

    def notify_playback_finished(self, playback_position: float, interrupted: bool) -> None:
        pass  # the runner's count; see _on_server_finished

    def clear_buffer(self) -> None:
        super().clear_buffer()
        # The agent session counts a segment at its first captured frame; the generator names
        # one at the first frame the runner hands it. Segments still wholly in this queue were
        # just dropped, so neither the generator nor the server will ever report them: they
        # finish (0 s heard) right after the server has answered this clear, behind those it
        # reports, which keeps the agent session's count in order.
        orphans = self._pending_playback_count - self._generator.unfinished_segments
        self._orphans.append(max(0, orphans))

    def _on_server_started(self, ev: PlaybackStarted) -> None:
        self.on_playback_started(created_at=ev.created_at)

    def _on_server_finished(self, ev: PlaybackFinished) -> None:
        self.on_playback_finished(
            playback_position=ev.playback_position, interrupted=ev.interrupted
        )

    def _on_server_cleared(self, _played: float) -> None:
        if not self._orphans:
            return
        for _ in range(self._orphans.pop(0)):
            self.on_playback_finished(playback_position=0.0, interrupted=True)


class AvatarSession(_BaseAvatarSession):
    """The avatar server's face for a LiveKit agent.

    ```python
    avatar = AvatarSession(base_url="http://127.0.0.1:8000", api_key="sk-...")
    await avatar.start(session, room=ctx.room)
    ```

    Args:
        base_url: the avatar server (``http(s)://host:port``), else ``AVATAR_SERVER_URL``.
        api_key: an API key of it (or an ephemeral key of an avatar session), else
            ``AVATAR_SERVER_API_KEY``.
        face, driving: the server's face and driving ids (its defaults when None).
        video_format: ``"i420"`` (raw frames, nothing to decode: the default) or ``"jpeg"``
            (smaller on the wire; decoded with Pillow, the ``jpeg`` extra).
        session_id: a REST session made beforehand (POST /v1/sessions) whose ``output_size`` and
            ``target_fps`` the avatar should use.
        listen_to_user: send ``avatar.listen`` while the user speaks (the face attends).
        http_session: an aiohttp session to open the WebSocket with (one is made otherwise).
        connect_timeout: seconds to wait for the connection and the session to open.
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
        listen_to_user: bool = True,
        http_session: aiohttp.ClientSession | None = None,
        connect_timeout: float = 15.0,
    ) -> None:
        super().__init__()
        self._generator = AvatarServerVideoGenerator(
            base_url=base_url,
            api_key=api_key,
            face=face,
            driving=driving,
            video_format=video_format,
            session_id=session_id,
            http_session=http_session,
            connect_timeout=connect_timeout,
        )
        self._listen_to_user = listen_to_user
        self._runner: AvatarRunner | None = None
        self._audio_output: ServerTimedAudioOutput | None = None
        self._session_for_listen: AgentSession | None = None

    @property
    def avatar_identity(self) -> str:
        # The agent publishes the avatar's tracks itself.
        if self._room is not None:
            return self._room.local_participant.identity
        return ""

    @property
    def provider(self) -> str:
        return "avatar-server"

    @property
    def generator(self) -> AvatarServerVideoGenerator:
        return self._generator

    @property
    def runner(self) -> AvatarRunner | None:
        return self._runner

    @property
    def audio_output(self) -> ServerTimedAudioOutput | None:
        return self._audio_output

    async def start(self, agent_session: AgentSession, room: rtc.Room) -> None:
        await super().start(agent_session, room)
        generator = self._generator
        await generator.connect()

        audio_output = ServerTimedAudioOutput(generator)
        runner = AvatarRunner(
            room,
            audio_recv=audio_output,
            video_gen=generator,
            options=AvatarOptions(
                video_width=generator.video_width,
                video_height=generator.video_height,
                video_fps=generator.video_fps,
                audio_sample_rate=OUTPUT_SAMPLE_RATE,
                audio_channels=1,
            ),
        )
        await runner.start()
        self._runner, self._audio_output = runner, audio_output
        agent_session.output.replace_audio_tail(audio_output)

        if self._listen_to_user:
            agent_session.on("user_state_changed", self._on_user_state_changed)
            self._session_for_listen = agent_session
        logger.info(
            "avatar server session %s: %dx%d at %g fps (%s)",
            generator.session.get("id"),
            generator.video_width,
            generator.video_height,
            generator.video_fps,
            generator.video_format,
        )

    def _on_user_state_changed(self, ev: UserStateChangedEvent) -> None:
        self._generator.set_listening(ev.new_state == "speaking")

    async def aclose(self) -> None:
        if self._session_for_listen is not None:
            self._session_for_listen.off("user_state_changed", self._on_user_state_changed)
            self._session_for_listen = None
        if self._runner is not None:
            await self._runner.aclose()
            self._runner = None
        await self._generator.aclose()
        # The base class removes the avatar's participant from the room, which here is the agent
        # itself: leave the room as it is.
        room = self._room
        if room is not None:
            room.off("connection_state_changed", self._on_connection_state_changed)
            self._room = None
        await super().aclose()


__all__ = ["AvatarSession", "ServerTimedAudioOutput"]
