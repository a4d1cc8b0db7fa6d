"""POST /api/v1/chat: the `/pacer` grammar over the API — the same `bot.chat.answers.answer` Slack and
the console call, so anything one surface can do, the others can. `pacer console` forwards its
lines here when another process (a running `pacer serve`) leads the scheduler, and asks GET
/api/v1/me first, so its banner names the caller and role this server applies, not its own
settings' guess."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from bot.api.fields import Text
from bot.api.guard import CallerDep, GuardedRoute
from bot.api.refusals import refusals
from bot.chat import answers
from bot.commands.grammar import MAX_CHARS

router = APIRouter(route_class=GuardedRoute, tags=["chat"])


class ChatIn(BaseModel):
    model_config = {"extra": "forbid"}

    text: Text = Field(
        min_length=1, max_length=MAX_CHARS, description="A /pacer command line, e.g. 'queue spot' or 'why 42'"
    )


class ChatOut(BaseModel):
    ok: bool
    text: str


@router.post(
    "/chat",
    response_model=ChatOut,
    responses=refusals(422),
    summary="Run a /pacer command as the caller: the personal token's holder, or 'api token' with PACER_API_ROLE",
)
def post_chat(body: ChatIn, request: Request, who: CallerDep) -> ChatOut:
    reply = answers.answer(request.app.state.pacer, who.name, body.text, surface="api", role=who.role)
    return ChatOut(ok=reply.ok, text=reply.text)


class CallerOut(BaseModel):
    name: str = Field(description="The personal token's holder, or 'api token' for the shared token")
    role: str = Field(description="The role this server applies to the caller: member or operator")
    person: bool = Field(description="Whether a person's own token proved the caller (false: the shared token)")


@router.get(
    "/me",
    response_model=CallerOut,
    responses=refusals(),
    summary="Who the bearer token speaks for here, and the role this server applies to its calls",
)
def get_me(who: CallerDep) -> CallerOut:
    return CallerOut(name=who.name, role=who.role.value, person=who.person)
