"""`Idempotency-Key` on POST /api/v1/sessions: a client that lost the answer to a create sends
it again with the same key, and gets the first answer rather than a second session. The rules
follow the IETF's Idempotency-Key draft and Stripe's API:

    the key         1 to 255 letters, digits and `- _ . : ~ + / =` (a UUID, a ULID, base64),
                    bare or as the draft's quoted string ("…"); anything else is a 422 naming
                    the header
    its scope       the caller (the API's name for whoever sent it): two callers' keys never meet
    the same body   the first answer again, 201 with `Idempotent-Replayed: true`; the session is
                    as it was then (GET /api/v1/sessions/<id> reads it now)
    another body    a 409 naming the header: a key names one request, and this one is taken
                    (the draft says 422; the OpenAPI document cannot say which keys are
                    taken, and a request it calls valid is never a 422)
    still running   a 409: the first request has made its session but not yet answered
    kept            KEPT (24 hours) from the first request; after that the key is new again

A request is the same when its body, read by the request model (`SessionCreate`), is: the order
of its keys and an explicit default do not make it another. The key is written in the
transaction that makes the session (`claim`), so no crash or race makes a key's session twice:
two requests with one key at once make one session, and the other waits for its answer (409).
A request refused (4xx) keeps nothing: the key is free for the corrected one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import delete, update
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from bot.api.guard import ApiError
from scheduler.errors import Refused
from scheduler.front import IdempotencyKey, session_scope
from templates import error_text

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_CHARS = 255
_CHARS = r"[A-Za-z0-9_.:~+/=-]"
PATTERN = rf'^(?:"{_CHARS}{{1,{MAX_KEY_CHARS}}}"|{_CHARS}{{1,{MAX_KEY_CHARS}}})$'
KEPT = timedelta(hours=24)


def key_of(header: str | None) -> str | None:
    """The key a request sent (the header's value, its quotes taken off), or None."""
    if header is None:
        return None
    return header[1:-1] if len(header) >= 2 and header[0] == header[-1] == '"' else header


def fingerprint(body: BaseModel) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def earlier_answer(engine: Any, caller: str, key: str, print_: str, now: datetime) -> dict[str, Any] | None:
    """The first answer to this caller's `key`, or None when the key is new (or expired: it is
    forgotten then, with every other key past KEPT). Refuses a key sent with another body or
    whose first request has not answered yet (409s)."""
    with session_scope(engine) as db:
        db.exec(delete(IdempotencyKey).where(col(IdempotencyKey.created_at) <= now - KEPT))
        row = db.exec(select(IdempotencyKey).where(IdempotencyKey.caller == caller, IdempotencyKey.key == key)).first()
        if row is None:
            return None
        if row.fingerprint != print_:
            message = error_text("api/idempotency_key_reused", header=HEADER, key=key, at=row.created_at,
                                 session_id=row.session_id)
            raise ApiError(409, "conflict", message, field=HEADER)
        if row.answer is None:
            raise Refused(
                error_text("api/idempotency_key_in_flight", header=HEADER, key=key, session_id=row.session_id)
            )
        return dict(row.answer)


def claim(caller: str, key: str, print_: str, now: datetime) -> Callable[[DBSession, int], None]:
    """What writes the key beside its new session, in the session's own transaction. Should a
    request with the same key have committed first, the insert fails and the session with it."""

    def write(db: DBSession, session_id: int) -> None:
        db.add(IdempotencyKey(caller=caller, key=key, fingerprint=print_, session_id=session_id, created_at=now))
        db.flush()

    return write


def record_answer(engine: Any, caller: str, key: str, answer: dict[str, Any]) -> None:
    with session_scope(engine) as db:
        db.exec(update(IdempotencyKey).where(
            col(IdempotencyKey.caller) == caller, col(IdempotencyKey.key) == key).values(answer=answer))
