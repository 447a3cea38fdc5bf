"""
openai-python's realtime client (AsyncOpenAI().realtime.connect, unchanged but for the base URL
and key) with an MCP tool the server runs: the session declares the MCP server in the SDK's own
params (`tools: [{"type": "mcp", ...}]`), asks a question, and, when the server asks for approval
(an mcp_approval_request item), approves it with an mcp_approval_response item, as the SDK's
types define them. Every server event is read as bytes and validated by pydantic against the
SDK's RealtimeServerEvent union. Ends at the first response.done whose output holds an mcp_call,
an error event, or the timeout.

Prints one JSON line per event: {"event": "server", "type", "model": the SDK class it validated
as, "item_type" (item events), "output" (response.done: the output items' types; the mcp_call's
output)}, {"event": "invalid", "type", "error"} for one that does not validate, then {"event": "done"}.
"""
import argparse
import asyncio

from openai import AsyncOpenAI
from openai.types.realtime import RealtimeServerEvent

from sdk_events import emit, validated_events, within


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--mcp-url", required=True)
    p.add_argument("--approval", default="always")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args()

    client = AsyncOpenAI(base_url=args.base_url, api_key=args.key, max_retries=0)
    async with client.realtime.connect(model="gpt-realtime") as conn:
        await conn.session.update(
            session={
                "type": "realtime",
                "output_modalities": ["text"],
                "tools": [
                    {
                        "type": "mcp",
                        "server_label": "tools",
                        "server_url": args.mcp_url,
                        "require_approval": args.approval,
                        "headers": {"X-Api-Key": "py-secret"},
                    }
                ],
            }
        )

        async def read() -> None:
            asked = False
            async for kind, event, _ in validated_events(conn, RealtimeServerEvent):
                line = {"event": "server", "type": kind, "model": type(event).__name__}
                item = getattr(event, "item", None)
                if item is not None:
                    line["item_type"] = item.type
                    line["item_class"] = type(item).__name__
                if kind == "conversation.item.done" and item is not None and item.type == "mcp_list_tools" and not asked:
                    asked = True
                    await conn.conversation.item.create(
                        item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in Paris?"}]}
                    )
                    await conn.response.create()
                if kind == "conversation.item.done" and item is not None and item.type == "mcp_approval_request":
                    await conn.conversation.item.create(
                        previous_item_id=item.id,
                        item={"type": "mcp_approval_response", "approval_request_id": item.id, "approve": True},
                    )
                if kind == "response.done":
                    output = event.response.output or []
                    line["output"] = [o.type for o in output]
                    calls = [o for o in output if o.type == "mcp_call"]
                    if calls:
                        line["call_output"] = calls[0].output
                        emit(**line)
                        return
                emit(**line)
                if kind == "error":
                    return

        await within(read, args.timeout)
    emit(event="done")


asyncio.run(main())
