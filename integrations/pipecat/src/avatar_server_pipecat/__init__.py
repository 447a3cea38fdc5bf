"""Pipecat plugin for the avatar server: AvatarVideoService renders the agent's TTS speech as a
talking face, in sync, over an avatar-only realtime session (docs/avatar-mode.md)."""

from .convert import i420_to_rgb, jpeg_to_rgb, parse_i420_header
from .video import OUTPUT_SAMPLE_RATE, AvatarVideoService, realtime_url

__all__ = ["AvatarVideoService", "OUTPUT_SAMPLE_RATE", "realtime_url", "i420_to_rgb", "jpeg_to_rgb", "parse_i420_header"]
__version__ = "0.1.0"
