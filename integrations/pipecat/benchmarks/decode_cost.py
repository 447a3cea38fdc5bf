"""What a frame costs the plugin to turn into RGB, per video format, on frames of a live server.

    python integrations/pipecat/benchmarks/decode_cost.py --url http://127.0.0.1:8080 --key avs_...

Opens one avatar-only session per format (i420, jpeg), keeps the first --frames frames as they
arrived (the binary message, or the text event), then times, over those frames, what the service
does with each: for i420 the header check and the BT.601 conversion (convert.i420_to_rgb), for
jpeg the JSON parse, the base64 decode and Pillow's decode (convert.jpeg_to_rgb). Prints one JSON
line per format: median and p90 per frame in ms, and the bytes a frame takes on the wire.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import time

from websockets.asyncio.client import connect

from avatar_server_pipecat import i420_to_rgb, jpeg_to_rgb, parse_i420_header, realtime_url
from avatar_server_pipecat.convert import I420_HEADER


async def collect(url: str, key: str, video_format: str, frames: int) -> list[bytes | str]:
    got: list[bytes | str] = []
    async with connect(
        realtime_url(url, {"intent": "avatar", "video_format": video_format}),
        additional_headers={"Authorization": f"Bearer {key}"},
        max_size=16 * 1024 * 1024,
        compression=None,
    ) as ws:
        async for message in ws:
            if isinstance(message, bytes) or '"response.output_image.delta"' in message[:64]:
                got.append(message)
                if len(got) >= frames:
                    break
    return got


def convert_i420(message: bytes) -> bytes:
    header = parse_i420_header(message)
    return i420_to_rgb(memoryview(message)[I420_HEADER.size :], header.width, header.height)


def convert_jpeg(message: str) -> bytes:
    event = json.loads(message)
    return jpeg_to_rgb(base64.b64decode(event["delta"]))[0]


def timed(fn, messages, rounds: int) -> list[float]:
    fn(messages[0])
    out = []
    for _ in range(rounds):
        for m in messages:
            start = time.perf_counter()
            fn(m)
            out.append((time.perf_counter() - start) * 1000)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    for video_format, fn in (("i420", convert_i420), ("jpeg", convert_jpeg)):
        messages = await collect(args.url, args.key, video_format, args.frames)
        ms = sorted(timed(fn, messages, args.rounds))
        wire = statistics.mean(len(m) for m in messages)
        size = parse_i420_header(messages[0])[1:3] if video_format == "i420" else None
        print(json.dumps({
            "format": video_format,
            "frames": len(messages),
            "size": size,
            "median_ms": round(statistics.median(ms), 3),
            "p90_ms": round(ms[int(len(ms) * 0.9)], 3),
            "wire_bytes": round(wire),
        }))


if __name__ == "__main__":
    asyncio.run(main())
