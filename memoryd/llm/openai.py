"""OpenAIChat: any OpenAI-compatible ``/v1/chat/completions`` endpoint, over httpx.

Works with OpenAI, vLLM, Ollama, llama.cpp's server and others that speak the Chat
Completions format. Every request has a timeout; 429, 5xx and connection errors are
retried with exponential backoff (honouring ``Retry-After``); other errors become an
`LLMError` naming the status and the server's message.

```python
model = OpenAIChat("gpt-4o-mini")                                   # OPENAI_API_KEY
local = OpenAIChat("llama3", base_url="http://localhost:11434/v1")  # Ollama
```
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import structlog

from memoryd import messages as msgs
from memoryd._json_values import loads
from memoryd.errors import InvalidMessage, LLMError

__all__ = ["OpenAIChat"]

log = structlog.get_logger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_REPLY_KEYS = ("role", "content", "tool_calls", "name")


DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""The largest answer body read from the server (`OpenAIChat(max_response_bytes=...)`)."""

_EXCERPT_BYTES = 64 * 1024
"""How much of an error answer is read to say what went wrong: enough for any error
object a server sends (its message is shown cut to 300 characters), not a whole page."""


class _TooLarge(Exception):
    """An answer body longer than the limit (the rest was not read)."""


def _read(response: httpx.Response, limit: int) -> bytes:
    """The body of a streamed ``response``, at most ``limit`` bytes.

    Raises:
        _TooLarge: The body is longer (stated by ``Content-Length``, or met while read).
    """
    stated = response.headers.get("content-length", "")
    if stated.isdigit() and int(stated) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _head(response: httpx.Response, limit: int) -> bytes:
    """The first ``limit`` bytes of a streamed ``response``'s body; the rest is not read."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk[: limit - size])
        size += len(chunks[-1])
        if size >= limit:
            break
    return b"".join(chunks)


def _excerpt(response: httpx.Response) -> str:
    """What an error answer says: its ``error.message``, else its first characters; of
    a long answer only the first `_EXCERPT_BYTES` are read."""
    raw = _head(response, _EXCERPT_BYTES)
    try:
        body = loads(raw)
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
    except ValueError:
        pass
    return raw.decode("utf-8", "replace")[:300]


def _normalised_call(call: Any) -> Any:
    """A tool call as servers that follow the API loosely send it, made a valid one: an
    empty or missing id gets a unique one (some local servers send ``""``), arguments
    sent as an object are encoded as the JSON string the API specifies, and a missing
    ``type`` is ``"function"``. Anything else is left for the message check to refuse."""
    if not isinstance(call, dict):
        return call
    fixed = dict(call)
    if not fixed.get("id"):
        fixed["id"] = f"call_{uuid.uuid4().hex}"
    fixed.setdefault("type", "function")
    function = fixed.get("function")
    if isinstance(function, dict) and isinstance(function.get("arguments"), dict | list):
        arguments = json.dumps(function["arguments"], ensure_ascii=False, separators=(",", ":"))
        fixed["function"] = {**function, "arguments": arguments}
    return fixed


class OpenAIChat:
    """A `ChatModel` on an OpenAI-compatible Chat Completions endpoint.

    Args:
        model: The model name the server knows.
        base_url: The API root (…/v1). Default: ``$OPENAI_BASE_URL``, else OpenAI's.
        api_key: Sent as a bearer token. Default: ``$OPENAI_API_KEY`` (none if unset).
        timeout: Seconds for each HTTP request (connect, read, write).
        max_retries: Retries after the first attempt on 429, 5xx and connection errors.
        backoff: The first retry's delay in seconds; doubled each retry (with jitter),
            capped at 30 s; a ``Retry-After`` header is honoured up to that cap.
        options: Extra request fields (``temperature``, ``max_tokens``, ...).
        sleep: Injected for tests; ``time.sleep`` by default.
        transport: An httpx transport (tests); default: a real network client.
        max_response_bytes: The largest answer read (default 32 MiB); a longer one is an
            `LLMError`, refused as it arrives without reading the rest.

    Raises:
        ValueError: An empty model name, a bad timeout, retry count or URL.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        options: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty str, not {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, not {max_retries!r}")
        if isinstance(backoff, bool) or not isinstance(backoff, int | float) or backoff < 0:
            raise ValueError(f"backoff must be a number of seconds >= 0, not {backoff!r}")
        if (
            isinstance(max_response_bytes, bool)
            or not isinstance(max_response_bytes, int)
            or max_response_bytes < 1
        ):
            raise ValueError(f"max_response_bytes must be an int >= 1, not {max_response_bytes!r}")
        self.max_response_bytes = max_response_bytes
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {url!r}")
        self.model = model
        self.base_url = url.rstrip("/")
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.options = dict(options or {})
        self._sleep = sleep
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(float(timeout)), headers=headers, transport=transport
        )

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        cap = 30.0
        if response is not None:
            after = response.headers.get("retry-after")
            try:
                if after is not None:
                    return min(max(float(after), 0.0), cap)
            except ValueError:
                pass
        return min(self.backoff * (2.0**attempt) * (0.5 + random.random() / 2), cap)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}/chat/completions"
        problem = ""
        for attempt in range(self.max_retries + 1):
            response: httpx.Response | None = None
            try:
                with self._client.stream("POST", url, json=body) as response:
                    if response.status_code == 200:
                        return self._answer(url, response)
                    problem = f"HTTP {response.status_code}: {_excerpt(response)}"
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code not in _RETRY_STATUS:
                    raise LLMError(
                        f"{url} refused the request ({problem}); check the model, "
                        "the key and the messages"
                    )
            if attempt < self.max_retries:
                delay = self._delay(attempt, response)
                log.info("llm_retry", url=url, attempt=attempt + 1, delay_s=delay, error=problem)
                self._sleep(delay)
        raise LLMError(
            f"{url} failed {self.max_retries + 1} times (last: {problem}); the server is down "
            "or overloaded: try again later or raise max_retries"
        )

    def _answer(self, url: str, response: httpx.Response) -> dict[str, Any]:
        """The JSON object of a 200 answer, read up to ``max_response_bytes``.

        Raises:
            LLMError: Too long, not JSON, or not an object.
        """
        try:
            raw = _read(response, self.max_response_bytes)
        except _TooLarge:
            raise LLMError(
                f"{url} answered with more than {self.max_response_bytes} bytes; the rest "
                "was not read (raise max_response_bytes if such answers are expected)"
            ) from None
        try:
            data = loads(raw)
        except ValueError as exc:
            text = raw[:200].decode("utf-8", "replace")
            raise LLMError(
                f"{url} answered 200 with a body that is not JSON ({exc}): {text!r}"
            ) from None
        if not isinstance(data, dict):
            raise LLMError(f"{url} answered with JSON that is not an object")
        return data

    def complete(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Send the conversation; return the first choice's assistant message.

        Args:
            messages: OpenAI-format messages.
            tools: OpenAI ``tools`` definitions (omitted when None or empty).

        Returns:
            The assistant message (``role``, ``content``, and ``tool_calls`` if any).

        Raises:
            LLMError: A refused request, retries exhausted, or a malformed answer.
        """
        body: dict[str, Any] = {**self.options, "model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        data = self._post(body)
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(
                f"the answer has no choices[0].message: {json.dumps(data)[:200]}"
            ) from None
        if not isinstance(message, dict):
            raise LLMError(f"choices[0].message is not an object: {message!r:.100}")
        reply = {k: message[k] for k in _REPLY_KEYS if k in message and message[k] is not None}
        reply["role"] = "assistant"
        reply.setdefault("content", None)
        refusal = message.get("refusal")
        if reply["content"] is None and "tool_calls" not in reply and isinstance(refusal, str):
            reply["content"] = refusal  # a refusal is the model's answer: the turn ends
        if isinstance(reply.get("tool_calls"), list):
            reply["tool_calls"] = [_normalised_call(call) for call in reply["tool_calls"]]
        try:
            return msgs.validate(reply, max_bytes=None)
        except InvalidMessage as exc:
            raise LLMError(f"the model's message is not a valid assistant message: {exc}") from exc

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIChat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAIChat({self.model!r}, base_url={self.base_url!r})"
