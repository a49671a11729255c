"""Kernel: a stateless LLM + tools + filters pipeline with the tool-calling loop.

```python
kernel = memoryd.Kernel(llm=model, tools=[lookup], filters=[memoryd.memory_filter(store)],
                        system_prompt="Be brief.")
result = kernel.invoke([messages.user("Hi")], context=memoryd.Context(conversation_id="s1"))
result.text
```

Without a memory filter the kernel runs in *full mode*: the loop accumulates the
messages of the invoke locally and sends all of them each round; nothing persists.
With one it runs in *delta mode* (see `memoryd.kernel.memory`): each round hands the
chain only the new messages and the filter swaps in the stored history. An invoke
without a conversation id then gets a made-up one whose history the memory filter keeps
in memory only, for that invoke: a one-off leaves nothing in the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from memoryd import messages as msgs
from memoryd._ids import IdSource
from memoryd._json_values import loads
from memoryd._shown import shown
from memoryd.errors import InvalidMessage, LLMError, StepLimitExceeded, ToolArgumentError
from memoryd.kernel.context import Context
from memoryd.kernel.filters import (
    ChatRequest,
    Message,
    SystemPromptFilter,
    ToolCall,
    ToolResult,
    chat_chain,
    check_filters,
    tool_chain,
)
from memoryd.kernel.memory import EPHEMERAL_PREFIX, MemoryFilter
from memoryd.kernel.tools import Tool, tools_by_name
from memoryd.llm.base import ChatModel

__all__ = ["DEFAULT_MAX_TOOL_CALLS", "InvokeResult", "Kernel", "message_text", "render_result"]

log = structlog.get_logger(__name__)

_INVOKE_IDS = IdSource()
"""Invoke ids of invokes given none (see `memoryd._ids`)."""


def message_text(message: Message) -> str:
    """The text of a message: its str content, or its text parts joined ('' when none).

    Args:
        message: A message.

    Returns:
        The text.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def render_result(value: Any) -> str:
    """A tool's return value as text for the model: str as is, the rest as JSON.

    Args:
        value: What the tool returned.

    Returns:
        The text: JSON, or ``str(value)`` for a value JSON cannot encode.

    Raises:
        Exception: The value cannot be made text at all (nested past the recursion
            limit, or a ``__str__`` that raises); the kernel answers the call with an
            error result naming its type.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


_LOGGED_CHARS = 200
"""The most characters of a value the model made (a call id, a tool name, an error's
text) that a log event shows: a reply may carry a megabyte of it."""


def _logged(text: str) -> str:
    """``text`` as a log event shows it: whole when short, else cut, with its length."""
    if len(text) <= _LOGGED_CHARS:
        return text
    return f"{text[:_LOGGED_CHARS]}... ({len(text):,} characters)"


def _tool_error(call: ToolCall, text: str) -> ToolResult:
    """The error result the model reads for a tool call that could not run."""
    log.info("tool_failed", tool=_logged(call.name), call_id=_logged(call.id), error=_logged(text))
    return ToolResult(call_id=call.id, name=call.name, content=text, is_error=True)


def _message_of(exc: BaseException) -> str:
    """``str(exc)``, or a note saying why it could not be had (its ``__str__`` raised)."""
    try:
        return str(exc)
    except Exception as problem:
        return f"(its message could not be shown: its __str__ raised {type(problem).__name__})"


def _tool_raised(call: ToolCall, exc: Exception) -> ToolResult:
    """The error result for arguments the tool refused, or for what the tool raised."""
    if isinstance(exc, ToolArgumentError):
        return _tool_error(call, f"Error: {_message_of(exc)}")
    return _tool_error(
        call, f"Error: tool {shown(call.name, 80)} raised {type(exc).__name__}: {_message_of(exc)}"
    )


def oversized_result(call_id: str, name: str, size: int, limit: int) -> ToolResult:
    """The error result the model reads in place of a tool's result of ``size`` bytes
    (as compact JSON) where its store keeps messages of at most ``limit``. The tool ran:
    failing the run instead would make every retry run it again, to fail the same way."""
    log.warning(
        "tool_result_too_large",
        tool=_logged(name),
        call_id=_logged(call_id),
        bytes=size,
        limit=limit,
    )
    text = (
        f"Error: the result of tool {shown(name, 80)} is {size:,} bytes as compact JSON; the "
        f"store keeps messages of at most {limit:,} bytes. Ask for less (a summary or a page of it)"
    )
    return ToolResult(call_id=call_id, name=name, content=text, is_error=True)


ANSWER_ROOM = 1024
"""Bytes a tool call's answer may take beside the call id it carries: the longest error
text memoryd answers a call with when its result cannot be recorded (`oversized_result`,
`recordable_result`), and the tool message around it."""


def check_reply_size(reply: msgs.CheckedMessages, limit: int | None) -> None:
    """Refuse a model's reply that its memory could not record, before any of its tool
    calls runs: larger than ``limit`` (its size was measured by its check), or with a
    call id so long that the call's answer, which carries it, could not be recorded.

    Otherwise the tools would run, their step could not be journaled, and every retry
    would run them again.

    Args:
        reply: The reply, checked (a batch of one).
        limit: The largest message the memory keeps, in bytes of compact JSON; None
            when nothing is recorded (no check).

    Raises:
        LLMError: The reply cannot be recorded (the message names its size and the limit).
    """
    if limit is None:
        return
    size = reply.sizes[0]
    if size > limit:
        raise LLMError(
            f"the model's reply is {size:,} bytes as compact JSON; the store keeps messages of "
            f"at most {limit:,} bytes, so it cannot be recorded: it was refused before any of "
            "its tool calls ran, and nothing of it was stored"
        )
    if size + ANSWER_ROOM <= limit:
        return  # every call id in it leaves its answer room
    for call in reply[0].get("tool_calls") or ():
        call_id = call["id"]
        id_size = len(json.dumps(call_id, ensure_ascii=False).encode("utf-8"))
        if id_size + ANSWER_ROOM > limit:
            raise LLMError(
                f"the model's reply has a tool call id of {id_size:,} bytes as JSON; an answer "
                f"to the call carries it and the store keeps messages of at most {limit:,} "
                "bytes, so it cannot be recorded: the reply was refused before any of its tool "
                "calls ran, and nothing of it was stored"
            )


def _without_surrogates(text: str) -> str | None:
    """``text`` with each lone surrogate replaced by U+FFFD and a note saying so, or None
    when it has none (it encodes as UTF-8 as it is)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return None
    # a pair of surrogates becomes the character it encodes; a lone one, U+FFFD
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    replaced = fixed.count("\ufffd") - text.count("\ufffd")
    return (
        f"{fixed}\n[memoryd: {replaced:,} lone UTF-16 surrogate(s) in this result, which "
        "cannot be stored as UTF-8, were replaced with U+FFFD]"
    )


def recordable_result(result: ToolResult, problem: Exception) -> ToolResult:
    """A tool result whose message was refused (``problem``) made into one the memory
    can record: its lone surrogates replaced with U+FFFD, saying so (a model may send
    ``"\\udc80"`` as valid JSON, and a tool echo it), or else an error result naming why.
    The tool ran: failing the run instead would make every retry run it again.

    Args:
        result: The refused result.
        problem: Why its message was refused (an `InvalidMessage`).

    Returns:
        The result to record.
    """
    content = result.content
    if isinstance(content, str):
        fixed = _without_surrogates(content)
        if fixed is not None:
            log.info(
                "tool_result_repaired", tool=_logged(result.name), call_id=_logged(result.call_id)
            )
            return dataclasses.replace(result, content=fixed)
    text = (
        f"Error: the result of tool {shown(result.name, 80)} cannot be recorded: "
        f"{_logged(_message_of(problem))}"
    )
    call = ToolCall(id=result.call_id, name=result.name, arguments="")
    return _tool_error(call, text)


def _arguments(call: ToolCall) -> Any:
    """A tool call's arguments decoded from JSON (blank text is no arguments).

    Raises:
        ValueError: They are not valid JSON.
    """
    return loads(call.arguments) if call.arguments.strip() else {}


def _tool_done(call: ToolCall, value: Any) -> ToolResult:
    """The result the model reads for a tool call that returned ``value``; an error
    result naming its type when it cannot be made text (`render_result` raised)."""
    try:
        text = render_result(value)
    except Exception as exc:  # RecursionError too: a deep value, or a __str__ that raises
        return _tool_error(
            call,
            f"Error: tool {shown(call.name, 80)} returned a {type(value).__name__} that cannot "
            f"be made text ({type(exc).__name__}); return a str or JSON-compatible values",
        )
    return ToolResult(call_id=call.id, name=call.name, content=text)


def _awaits_model(llm: Any) -> bool:
    """True when the model has an ``async def acomplete`` (`Kernel.achat_checked` awaits it)."""
    return inspect.iscoroutinefunction(getattr(llm, "acomplete", None))


@dataclass(frozen=True, kw_only=True, slots=True)
class InvokeResult:
    """What one `Kernel.invoke` produced.

    Attributes:
        message: The final assistant message.
        messages: Everything the invoke produced, in order: assistant messages with
            tool calls, tool results, and the final answer.
        context: The context the invoke ran with (its conversation id included; a
            one-off's made-up id is reported but was never stored).
        steps: How many LLM calls were made.
    """

    message: Message
    messages: tuple[Message, ...]
    context: Context
    steps: int

    @property
    def text(self) -> str:
        """The final answer's text."""
        return message_text(self.message)


def _check_llm(llm: Any) -> ChatModel:
    if not callable(getattr(llm, "complete", None)):
        raise TypeError(
            "llm must be a chat model with complete(messages, *, tools=None) "
            f"(memoryd.llm.ScriptedModel, memoryd.llm.OpenAIChat), got {llm!r:.80}"
        )
    return llm  # type: ignore[no-any-return]


def check_max_steps(value: Any, name: str = "max_steps") -> int:
    """``max_steps`` (or the count ``name``) as an int >= 1, or ValueError.

    Args:
        value: The candidate.
        name: What it is, for the message.

    Returns:
        The value.

    Raises:
        ValueError: Not an int >= 1.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, not {value!r}")
    return value


DEFAULT_MAX_TOOL_CALLS = 32
"""The most tool calls of one assistant message that run (`Kernel(max_tool_calls=...)`)."""


class Kernel:
    """LLM + tools + filters, no state of its own.

    Args:
        llm: The chat model.
        tools: `Tool` objects (``@memoryd.tool``) or plain type-hinted functions.
        filters: Filter layers; the first is the outermost.
        system_prompt: Sent first on every LLM call by an innermost transient filter;
            never stored.
        max_steps: The most LLM calls one invoke may make.
        max_tool_calls: The most tool calls of one reply that run. A model asking for
            more in one step (a runaway, or one talked into it) gets an error result for
            each call past it, and runs none of them: every call is answered, and the
            model reads why.

    Raises:
        TypeError: ``llm`` is not a chat model; a filter or tool is not one.
        ValueError: Duplicate tool names; a bad ``max_steps`` or ``max_tool_calls``.
        InvalidMessage: ``system_prompt`` is not text.
    """

    def __init__(
        self,
        *,
        llm: ChatModel,
        tools: Sequence[Tool | Any] = (),
        filters: Sequence[Any] = (),
        system_prompt: str | None = None,
        max_steps: int = 10,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
    ) -> None:
        self.llm = _check_llm(llm)
        self.tools = tools_by_name(tools)
        self.filters = check_filters(filters)
        self.system_prompt = system_prompt
        self.max_steps = check_max_steps(max_steps)
        self.max_tool_calls = check_max_steps(max_tool_calls, "max_tool_calls")
        inner = [SystemPromptFilter(system_prompt)] if system_prompt is not None else []
        self._inner = tuple(inner)
        layers = (*self.filters, *inner)
        self._chat = chat_chain(layers, self._call_llm)
        self._tool = tool_chain(layers, self._run_tool)
        self._memory = [f for f in self.filters if isinstance(f, MemoryFilter)]
        self._tool_layers = any(callable(getattr(f, "around_tool", None)) for f in self.filters)

    @property
    def tool_specs(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` definitions of the kernel's tools."""
        return [t.schema for t in self.tools.values()]

    # -- terminals ----------------------------------------------------------------------

    def _call_llm(self, request: ChatRequest) -> Message:
        return self._checked_reply(request)[0]

    def _checked_reply(self, request: ChatRequest) -> msgs.CheckedMessages:
        """Call the model; its reply checked once, where it arrives."""
        reply = self.llm.complete(list(request.messages), tools=list(request.tools) or None)
        return self._check_reply(reply)

    def _check_reply(self, reply: Any) -> msgs.CheckedMessages:
        """The model's reply checked once, as a batch of one, or `LLMError`; with memory
        filters, also against the largest message their stores keep (`check_reply_size`),
        before they store it and any of its tools runs.

        A kernel without a memory filter keeps nothing, so it has no limit to hold a
        reply to: its caller (an `Agent`, which knows its stores) checks that itself."""
        if not isinstance(reply, dict) or reply.get("role") != "assistant":
            raise LLMError(f"the model returned {reply!r:.80}, not an assistant message dict")
        try:
            checked = msgs.check([reply], max_bytes=None)
        except InvalidMessage as exc:
            problem = exc.__cause__ or exc
            raise LLMError(f"the model returned an invalid assistant message: {problem}") from exc
        if self._memory:
            check_reply_size(checked, self._record_limit())
        return checked

    def _run_tool(self, call: ToolCall) -> ToolResult:
        found = self.tools.get(call.name)
        if found is None:
            known = sorted(self.tools)
            return _tool_error(
                call, f"Error: there is no tool {shown(call.name, 80)}; the tools are {known}"
            )
        try:
            arguments = _arguments(call)
        except ValueError as exc:
            return _tool_error(
                call, f"Error: the arguments of {shown(call.name, 80)} are not valid JSON: {exc}"
            )
        try:
            value = found.invoke(arguments)
        except Exception as exc:
            return _tool_raised(call, exc)
        return _tool_done(call, value)

    @staticmethod
    def _begin_plain(
        call: ToolCall, found: Tool, arguments: Any
    ) -> ToolResult | Coroutine[Any, Any, Any]:
        """A plain function tool called (in a worker thread, for `acall_tool`): its
        result, or the coroutine it returned, for the event loop to await."""
        try:
            value = found.begin(arguments)
        except Exception as exc:
            return _tool_raised(call, exc)
        if inspect.iscoroutine(value):
            return value
        return _tool_done(call, value)

    # -- single steps (the agent drives its own loop with these) ---------------------------

    def chat(
        self,
        messages: Sequence[Message],
        *,
        context: Context | None = None,
        step: int = 0,
        invoke_id: str = "",
    ) -> Message:
        """One LLM call through the ``around_chat`` layers.

        Args:
            messages: What to send (before the filters change it).
            context: The context (default: an empty one).
            step: The step number filters see.
            invoke_id: The id filters see (memory idempotency keys use it).

        Returns:
            The assistant message.

        Raises:
            LLMError: The model failed or answered with something invalid.
        """
        return self._chat(self._request(messages, context, step, invoke_id))

    def chat_checked(
        self,
        messages: Sequence[Message],
        *,
        context: Context | None = None,
        step: int = 0,
        invoke_id: str = "",
    ) -> msgs.CheckedMessages:
        """`chat`, answering the reply as a checked batch of one (`messages.check`).

        Without filters, the reply checked where it left the model is answered as it
        is; with filters, which may have changed it, the chain's answer is checked.

        Args:
            messages: As for `chat`.
            context: As for `chat`.
            step: As for `chat`.
            invoke_id: As for `chat`.

        Returns:
            The assistant message, in a `CheckedMessages` of one.

        Raises:
            LLMError: The model failed or answered with something invalid.
            InvalidMessage: A filter answered with an invalid message.
        """
        request = self._request(messages, context, step, invoke_id)
        if self.filters:
            return msgs.check([self._chat(request)], max_bytes=None)
        if not self._inner:  # no layer at all: the model's checked reply as it is
            return self._checked_reply(request)
        replies: list[msgs.CheckedMessages] = []

        def terminal(inner: ChatRequest) -> Message:
            replies.append(self._checked_reply(inner))
            return replies[-1][0]

        chat_chain(self._inner, terminal)(request)
        return replies[-1]

    def _request(
        self, messages: Sequence[Message], context: Context | None, step: int, invoke_id: str
    ) -> ChatRequest:
        return ChatRequest(
            messages=tuple(messages),
            tools=tuple(self.tool_specs),
            context=context or Context(),
            step=step,
            invoke_id=invoke_id,
        )

    def call_tool(self, call: Message | ToolCall, *, context: Context | None = None) -> ToolResult:
        """Run one tool call through the ``around_tool`` layers.

        A tool that raises, an unknown tool and refused arguments all become an error
        result the model can read; only a filter's own exception propagates.

        Args:
            call: An entry of an assistant message's ``tool_calls``, or a `ToolCall`.
            context: The context (default: an empty one).

        Returns:
            The result.
        """
        if not isinstance(call, ToolCall):
            call = ToolCall.from_message(call, context or Context())
        return self._tool(call)

    def skip_call(
        self, call: Message | ToolCall, asked: int, *, context: Context | None = None
    ) -> ToolResult:
        """The error result of a call past ``max_tool_calls`` in a reply of ``asked``
        calls: the tool does not run, and the model reads why."""
        if not isinstance(call, ToolCall):
            call = ToolCall.from_message(call, context or Context())
        return _tool_error(
            call,
            f"Error: not run: this reply asked for {asked} tool calls and at most "
            f"{self.max_tool_calls} run per step; ask for fewer at a time",
        )

    # -- the same single steps from an event loop (`Agent.arun`) -------------------------

    async def achat_checked(
        self,
        messages: Sequence[Message],
        *,
        context: Context | None = None,
        step: int = 0,
        invoke_id: str = "",
    ) -> msgs.CheckedMessages:
        """`chat_checked` from an event loop, never blocking it.

        A model with an ``async def acomplete`` (same arguments as ``complete``) is
        awaited on the loop when the kernel has no filters of its own (the system
        prompt is one of the kernel's). Otherwise the whole call, filters included,
        runs in a worker thread: a filter or a model written for threads may block.
        """
        if self.filters or not _awaits_model(self.llm):
            return await asyncio.to_thread(
                self.chat_checked, messages, context=context, step=step, invoke_id=invoke_id
            )
        request = self._request(messages, context, step, invoke_id)
        if self._inner:  # the transient layers only rewrite the request (the system prompt)
            sent: list[ChatRequest] = []

            def terminal(inner: ChatRequest) -> Message:
                sent.append(inner)
                return {"role": "assistant", "content": ""}

            chat_chain(self._inner, terminal)(request)
            request = sent[-1]
        reply = await self.llm.acomplete(  # type: ignore[attr-defined]
            list(request.messages), tools=list(request.tools) or None
        )
        return self._check_reply(reply)

    async def acall_tool(
        self, call: Message | ToolCall, *, context: Context | None = None
    ) -> ToolResult:
        """`call_tool` from an event loop, never blocking it.

        An ``async def`` tool is awaited on the loop when no filter has an
        ``around_tool`` layer; a plain function (which may block) runs in a worker
        thread then, and a coroutine it returns is awaited on the loop, as an ``async
        def`` tool's is. A tool call with filters around it runs in a worker thread
        whole (a coroutine returned there runs to completion in an event loop of its
        own, `Tool.invoke`).
        """
        if not isinstance(call, ToolCall):
            call = ToolCall.from_message(call, context or Context())
        if self._tool_layers:
            return await asyncio.to_thread(self._tool, call)
        found = self.tools.get(call.name)
        try:
            arguments = _arguments(call)
        except ValueError:
            found = None
        if found is None:  # the error result, worded as the thread path words it
            return self._tool(call)
        try:
            if found.awaitable:
                value = await found.begin(arguments)
            else:
                begun = await asyncio.to_thread(self._begin_plain, call, found, arguments)
                if isinstance(begun, ToolResult):
                    return begun
                value = await begun
        except Exception as exc:
            return _tool_raised(call, exc)
        return _tool_done(call, value)

    # -- the tool loop --------------------------------------------------------------------

    def invoke(
        self, messages: Sequence[Message], *, context: Context | None = None
    ) -> InvokeResult:
        """Run the tool loop: LLM, tools, LLM again, until plain text or ``max_steps``.

        Args:
            messages: The new messages (usually one user message). In delta mode they
                are stored; in full mode they are all the model sees.
            context: The conversation id and metadata.

        Returns:
            The final answer and everything the invoke produced.

        Raises:
            InvalidMessage: ``messages`` is empty or holds a bad message.
            TypeError: ``context`` is not a `Context`.
            StepLimitExceeded: The model still asked for tools after ``max_steps`` calls.
            LLMError: The model failed.
        """
        batch = msgs.validate_many(messages, max_bytes=None)
        if context is None:
            context = Context()
        if not isinstance(context, Context):
            raise TypeError(f"context must be a memoryd.Context, not {type(context).__name__}")
        invoke_id = _INVOKE_IDS.next()
        ephemeral = bool(self._memory) and context.conversation_id is None
        if ephemeral:
            context = context.with_conversation_id(f"{EPHEMERAL_PREFIX}{invoke_id}")
            assert context.conversation_id is not None
            for memory in self._memory:
                memory.begin_one_off(context.conversation_id)
        try:
            return self._loop(batch, context, invoke_id)
        finally:
            if ephemeral:
                assert context.conversation_id is not None
                for memory in self._memory:
                    memory.forget(context.conversation_id)

    def _loop(self, batch: list[Message], context: Context, invoke_id: str) -> InvokeResult:
        delta_mode = bool(self._memory)
        sent: list[Message] = list(batch)  # full mode: everything so far
        delta: list[Message] = list(batch)  # delta mode: only what is new
        produced: list[Message] = []
        limit = self._record_limit() if delta_mode else None
        for step in range(self.max_steps):
            reply = self.chat(
                delta if delta_mode else sent, context=context, step=step, invoke_id=invoke_id
            )
            produced.append(reply)
            sent.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return InvokeResult(
                    message=reply, messages=tuple(produced), context=context, steps=step + 1
                )
            cap = self.max_tool_calls
            delta = [
                self._recordable(
                    self.call_tool(call, context=context)
                    if position < cap
                    else self.skip_call(call, len(calls), context=context),
                    limit,
                )
                for position, call in enumerate(calls)
            ]
            produced.extend(delta)
            sent.extend(delta)
        if delta_mode and context.conversation_id is not None:
            for memory in self._memory:  # keep the stored tool calls answered
                memory.store_delta(
                    context.conversation_id, delta, invoke_id=invoke_id, step=self.max_steps
                )
        raise StepLimitExceeded(
            f"the tool loop made {self.max_steps} LLM calls and the model still asks for "
            "tools; raise max_steps or check what the tools return"
        )

    def _record_limit(self) -> int | None:
        """The largest message the memory filters' stores keep (None: no such limit)."""
        limits = [getattr(m.store, "max_message_bytes", None) for m in self._memory]
        known = [n for n in limits if isinstance(n, int) and not isinstance(n, bool)]
        return min(known) if known else None

    @staticmethod
    def _recordable(result: ToolResult, limit: int | None) -> Message:
        """A tool result's message as the memory can store it (`recordable_result`,
        `oversized_result`): a tool call stored is never left unanswered."""
        try:
            message = result.message
        except InvalidMessage as exc:  # a lone surrogate, say: the builder's check said so
            result = recordable_result(result, exc)
            message = result.message
        if limit is None or (len(result.content) + len(result.call_id)) * 6 + 64 <= limit:
            return message  # fits whatever JSON makes of it (6 bytes a character at most)
        size = msgs.check([message], max_bytes=None).sizes[0]
        if size <= limit:
            return message
        return oversized_result(result.call_id, result.name, size, limit).message

    def __repr__(self) -> str:
        return f"<Kernel tools={sorted(self.tools)} filters={len(self.filters)}>"
