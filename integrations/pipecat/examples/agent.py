"""A voice agent with a face: Deepgram (speech to text) -> OpenAI (LLM) -> Cartesia (voice) ->
the avatar server (face, in sync with the voice) -> a local WebRTC page or a Daily room.

    pip install "./integrations/pipecat[example]"   # + pipecat-ai[daily,webrtc,runner,silero,deepgram,openai,cartesia]

    export AVATAR_SERVER_URL=http://127.0.0.1:8080   # the avatar server (npm start)
    export AVATAR_API_KEY=...                        # one of its API keys (npm run keys)
    export DEEPGRAM_API_KEY=... OPENAI_API_KEY=... CARTESIA_API_KEY=...

    python integrations/pipecat/examples/agent.py               # open http://localhost:7860/client
    DAILY_API_KEY=... python integrations/pipecat/examples/agent.py -t daily   # a Daily room

Optional: AVATAR_FACE (a face id), AVATAR_VIDEO_FORMAT (jpeg, the default, or i420: raw frames,
no JPEG encode on the server but 10 MB/s at 512x512), AVATAR_VIDEO_SIZE (the server's frame size, default 512x512) and
AVATAR_FPS (its frame rate, default 25), CARTESIA_VOICE_ID, OPENAI_MODEL. The transport is built
with AVATAR_VIDEO_SIZE and AVATAR_FPS before the avatar session opens; when the session says
otherwise (its session object has the size and rate), a warning says what to set.
"""

import os

from loguru import logger
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import LLMRunFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.runner.types import RunnerArguments
from pipecat.runner.utils import create_transport
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.transports.base_transport import BaseTransport, TransportParams
from pipecat.workers.runner import WorkerRunner

from avatar_server_pipecat import AvatarVideoService

WIDTH, HEIGHT = (int(v) for v in os.getenv("AVATAR_VIDEO_SIZE", "512x512").split("x"))
FPS = int(os.getenv("AVATAR_FPS", "25"))

# The avatar's frames are shown as they come (video_out_is_live), at the server's size and rate
# (a transport resizes frames of another size, at a cost). 24 kHz out: the avatar's played audio
# comes back at 24 kHz, so nothing is resampled on the way out.
VIDEO = dict(
    video_out_enabled=True,
    video_out_is_live=True,
    video_out_width=WIDTH,
    video_out_height=HEIGHT,
    video_out_framerate=FPS,
)


def daily_params():
    from pipecat.transports.daily.transport import DailyParams  # needs pipecat-ai[daily]

    return DailyParams(audio_in_enabled=True, audio_out_enabled=True, **VIDEO)


transport_params = {
    "daily": daily_params,
    "webrtc": lambda: TransportParams(audio_in_enabled=True, audio_out_enabled=True, **VIDEO),
}


async def run_bot(transport: BaseTransport, runner_args: RunnerArguments):
    stt = DeepgramSTTService(api_key=os.environ["DEEPGRAM_API_KEY"])
    llm = OpenAILLMService(
        api_key=os.environ["OPENAI_API_KEY"],
        settings=OpenAILLMService.Settings(
            model=os.getenv("OPENAI_MODEL", "gpt-4.1-mini"),
            system_instruction=(
                "You are a friendly assistant with a face, talking to the user over video. "
                "Answer in one or two short spoken sentences, without lists or formatting."
            ),
        ),
    )
    tts = CartesiaTTSService(
        api_key=os.environ["CARTESIA_API_KEY"],
        settings=CartesiaTTSService.Settings(voice=os.getenv("CARTESIA_VOICE_ID", "71a7ad14-091c-4e8e-a314-022ece01c121")),
    )
    avatar = AvatarVideoService(
        api_key=os.environ["AVATAR_API_KEY"],
        base_url=os.getenv("AVATAR_SERVER_URL", "http://127.0.0.1:8080"),
        face=os.getenv("AVATAR_FACE") or None,
        video_format=os.getenv("AVATAR_VIDEO_FORMAT", "jpeg"),
    )

    @avatar.event_handler("on_connected")
    async def on_connected(service, session):
        # The session says its frame size and rate when it opens; the transport was given its
        # own when it was built (VIDEO above), before the pipeline started.
        if service.frame_size != (WIDTH, HEIGHT) or service.frame_rate != FPS:
            w, h = service.frame_size or (0, 0)
            logger.warning(
                f"the avatar sends {w}x{h} at {service.frame_rate:g} fps, the transport expects {WIDTH}x{HEIGHT} "
                f"at {FPS}: set AVATAR_VIDEO_SIZE={w}x{h} AVATAR_FPS={service.frame_rate:g}"
            )

    @avatar.event_handler("on_playback_finished")
    async def on_playback_finished(service, segment_id, played_ms, interrupted):
        logger.info(f"avatar: {segment_id} {'cut after' if interrupted else 'played'} {played_ms} ms")

    context = LLMContext()
    user_aggregator, assistant_aggregator = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(vad_analyzer=SileroVADAnalyzer())
    )

    pipeline = Pipeline(
        [
            transport.input(),
            stt,
            user_aggregator,
            llm,
            tts,
            avatar,  # right after the TTS: its audio in, the face and the played audio out
            transport.output(),
            assistant_aggregator,
        ]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_out_sample_rate=24000, enable_metrics=True),
        idle_timeout_secs=runner_args.pipeline_idle_timeout_secs,
    )

    @transport.event_handler("on_client_connected")
    async def on_client_connected(transport, client):
        context.add_message({"role": "user", "content": "(The user just joined the call. Greet them in one sentence.)"})
        await worker.queue_frames([LLMRunFrame()])

    @transport.event_handler("on_client_disconnected")
    async def on_client_disconnected(transport, client):
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=runner_args.handle_sigint)
    await runner.run(worker)


async def bot(runner_args: RunnerArguments):
    transport = await create_transport(runner_args, transport_params)
    await run_bot(transport, runner_args)


if __name__ == "__main__":
    from pipecat.runner.run import main

    main()
