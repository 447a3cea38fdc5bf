"""
What the openai-python client scripts here share: one JSON line per thing seen (emit), and the
server's events read as bytes and validated by pydantic against one of the SDK's unions (the
types the SDK's own recv() builds its objects from, checked here rather than constructed).
"""
import asyncio
import json

from pydantic import TypeAdapter, ValidationError


def emit(**line):
    print(json.dumps(line), flush=True)


async def validated_events(conn, union, passthrough=()):
    """
    Yields (type, event, data) for every server event of `conn`: `event` validated against
    `union`, or None for a type in `passthrough` (given raw in `data`). An event that does not
    validate is reported as {"event": "invalid", "type", "error"} and not yielded.
    """
    adapter = TypeAdapter(union)
    while True:
        raw = await conn.recv_bytes()
        data = json.loads(raw)
        kind = data.get("type")
        if kind in passthrough:
            yield kind, None, data
            continue
        try:
            event = adapter.validate_json(raw)
        except ValidationError as err:
            emit(event="invalid", type=kind, error=str(err)[:1500])
            continue
        yield kind, event, data


async def within(read, timeout: float) -> None:
    """Runs `read()` for at most `timeout` seconds; {"event": "timeout"} if it did not finish."""
    try:
        await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        emit(event="timeout")
