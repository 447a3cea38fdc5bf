"""LiveKit Agents plugin for the avatar server's avatar-only sessions.

```python
from avatar_server_livekit import AvatarSession

avatar = AvatarSession(base_url="http://127.0.0.1:8000", api_key="sk-...")
await avatar.start(session, room=ctx.room)
```
"""

from .avatar import AvatarSession, ServerTimedAudioOutput
from .generator import (
    OUTPUT_SAMPLE_RATE,
    AvatarServerError,
    AvatarServerVideoGenerator,
    AvatarVideoFrame,
    PlaybackFinished,
    PlaybackStarted,
    realtime_url,
)

__version__ = "0.1.0"

__all__ = [
    "OUTPUT_SAMPLE_RATE",
    "AvatarServerError",
    "AvatarServerVideoGenerator",
    "AvatarSession",
    "AvatarVideoFrame",
    "PlaybackFinished",
    "PlaybackStarted",
    "ServerTimedAudioOutput",
    "realtime_url",
    "__version__",
]
