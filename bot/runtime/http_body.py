"""Reading a request body under a size limit, shared by the Slack and GitHub edges and the API."""

from __future__ import annotations

from starlette.requests import Request


async def read_bounded(request: Request, limit: int) -> bytes | None:
    """The whole body, or None as soon as it is known to pass `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
