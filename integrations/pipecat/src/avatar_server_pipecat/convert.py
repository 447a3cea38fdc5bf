"""Turning the avatar server's frames into the RGB bytes of pipecat's OutputImageRawFrame.

Two wire formats (docs/avatar-mode.md):

- ``jpeg``: base64 JPEG in ``response.output_image.delta`` (about 45 KB a 512x512 frame);
- ``i420``: a binary WebSocket message, a 24-byte header then the Y, U and V planes, BT.601
  limited range (393 KB a 512x512 frame, 9x the JPEG's bytes).

Both run off the event loop (the service calls them in a worker thread). On frames of the live
server (512x512, the face at rest), timed interleaved on the 2-core test machine: a JPEG (39 KB)
parsed, base64-decoded and decoded with Pillow in 1.4 ms median, an I420 frame converted below in
2.9 ms; the whole plugin process (receiving, converting, pushing frames through pipecat) spends
2.7-3.3 ms of CPU a frame with JPEG and 5.0-5.9 ms with I420 (benchmarks/decode_cost.py, this package's README).
"""

from __future__ import annotations

import io
import struct
from typing import NamedTuple

import numpy as np
from PIL import Image

#: The binary header of a raw frame: magic, frame index, width, height, reserved, pts (ns).
I420_HEADER = struct.Struct("<4sIHHIQ")
I420_MAGIC = b"I420"


class RawFrameHeader(NamedTuple):
    frame_index: int
    width: int
    height: int
    pts_ns: int


def parse_i420_header(message: bytes) -> RawFrameHeader:
    """The header of one binary frame message; raises ValueError for anything else."""
    if len(message) < I420_HEADER.size:
        raise ValueError(f"a binary message of {len(message)} bytes is shorter than a frame header")
    magic, index, width, height, _reserved, pts_ns = I420_HEADER.unpack_from(message)
    if magic != I420_MAGIC:
        raise ValueError(f"a binary message starts with {magic!r}, not {I420_MAGIC!r}")
    if width % 2 or height % 2:
        raise ValueError(f"an I420 frame of odd size {width}x{height}")
    expected = I420_HEADER.size + width * height * 3 // 2
    if len(message) != expected:
        raise ValueError(f"an I420 frame of {width}x{height} holds {len(message)} bytes, not {expected}")
    return RawFrameHeader(index, width, height, pts_ns)


def i420_to_rgb(planes: bytes | memoryview, width: int, height: int) -> bytes:
    """BT.601 limited-range I420 (Y, then U and V at half size each way) to packed RGB24.

    Fixed point in int32 (coefficients x256, as in the usual integer form of the BT.601 matrix):
    every chroma sample is applied to its 2x2 luma block by broadcasting, so the chroma planes are
    never upsampled into full-size copies.
    """
    n = width * height
    hw, hh = width // 2, height // 2
    buf = memoryview(planes)
    y = np.frombuffer(buf, np.uint8, n).reshape(hh, 2, hw, 2)
    u = np.frombuffer(buf, np.uint8, n // 4, n).reshape(hh, 1, hw, 1).astype(np.int32) - 128
    v = np.frombuffer(buf, np.uint8, n // 4, n + n // 4).reshape(hh, 1, hw, 1).astype(np.int32) - 128
    # 1.164 * (Y - 16), with the rounding half of the final >> 8 folded in.
    luma = (y.astype(np.int32) - 16) * 298 + 128
    rgb = np.empty((hh, 2, hw, 2, 3), np.uint8)
    # R = Y' + 1.596 V, G = Y' - 0.392 U - 0.813 V, B = Y' + 2.017 U
    for channel, chroma in enumerate((409 * v, -100 * u - 208 * v, 516 * u)):
        value = luma + chroma
        value >>= 8
        np.clip(value, 0, 255, out=value)
        rgb[..., channel] = value
    return rgb.reshape(height, width, 3).tobytes()


def jpeg_to_rgb(jpeg: bytes) -> tuple[bytes, tuple[int, int]]:
    """A JPEG to packed RGB24 bytes and its (width, height)."""
    with Image.open(io.BytesIO(jpeg)) as image:
        if image.mode != "RGB":
            image = image.convert("RGB")
        return image.tobytes(), image.size
