"""A LiveKit voice agent with the avatar server's face.

A complete livekit-agents worker: OpenAI for speech recognition, the language model and the voice,
Silero for voice activity. The only avatar-specific lines are the two marked below.

Needs:
    pip install ./integrations/livekit "livekit-agents[openai,silero]~=1.8"
    LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET   your LiveKit server or LiveKit Cloud
    OPENAI_API_KEY                                     for the STT, LLM and TTS below
    AVATAR_SERVER_URL                                  e.g. http://127.0.0.1:8000
    AVATAR_SERVER_API_KEY                              an API key of that server
    AVATAR_FACE, AVATAR_DRIVING                        optional: the server's face / driving ids

Run:
    python examples/agent.py download-files   # once: Silero's model
    python examples/agent.py dev

then open a room with the agent (LiveKit's Agents Playground, or any LiveKit client) and talk:
the agent publishes the avatar's video and its lip-synced voice as its own tracks.
"""

from __future__ import annotations

import logging
import os

from avatar_server_livekit import AvatarSession
from livekit.agents import Agent, AgentServer, AgentSession, JobContext, JobProcess, cli
from livekit.plugins import openai, silero

logger = logging.getLogger("avatar-agent")

server = AgentServer()


def prewarm(proc: JobProcess) -> None:
    proc.userdata["vad"] = silero.VAD.load()


server.setup_fnc = prewarm


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    await ctx.connect()

    session = AgentSession(
        vad=ctx.proc.userdata["vad"],
        stt=openai.STT(),
        llm=openai.LLM(model="gpt-4o-mini"),
        tts=openai.TTS(voice="alloy"),
    )

    # -- the avatar: these two lines ------------------------------------------------------------
    avatar = AvatarSession(
        face=os.environ.get("AVATAR_FACE"), driving=os.environ.get("AVATAR_DRIVING")
    )
    await avatar.start(session, room=ctx.room)
    # --------------------------------------------------------------------------------------------

    await session.start(
        agent=Agent(
            instructions="You are a friendly assistant with a face. Keep your answers short.",
        ),
        room=ctx.room,
    )
    await session.generate_reply(instructions="Greet the user and offer your help.")


if __name__ == "__main__":
    cli.run_app(server)
