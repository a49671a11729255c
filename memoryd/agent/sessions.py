"""An Agent's sessions (Agently): the ones it knows by id, the active one, its chat history.

`Sessions` is a dict of `memoryd.Session` keyed by id that refuses a value under another id's key:
``agent.sessions[restored.id] = restored`` then ``agent.activate_session(restored.id)``
restores an exported session; handlers registered on a session stay with it, so
re-activating its id finds them again. `SessionMethods` is the Agent's session API:
``activate_session(id, **settings)``, ``sessions``, and the chat-history and handler
methods that act on the active session.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from memoryd.provider.protocol import MemoryProvider
from memoryd.provider.session import Session

__all__ = ["SessionMethods", "Sessions"]


class Sessions(MutableMapping[str, Session]):
    """The sessions of one agent, by id, in the order they were added."""

    def __init__(self) -> None:
        self._by_id: dict[str, Session] = {}

    def __getitem__(self, session_id: str) -> Session:
        return self._by_id[session_id]

    def __setitem__(self, session_id: str, session: Session) -> None:
        if not isinstance(session, Session):
            raise TypeError(f"agent.sessions holds memoryd.Session objects, not {session!r:.80}")
        if session.id != session_id:
            raise ValueError(
                f"session {session.id!r} cannot be kept under the id {session_id!r}; "
                "use agent.sessions[session.id] = session"
            )
        self._by_id[session_id] = session

    def __delitem__(self, session_id: str) -> None:
        del self._by_id[session_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"<Sessions {list(self._by_id)!r}>"


class SessionMethods:
    """The session API of `memoryd.Agent` (Agently's agent-level session methods)."""

    provider: MemoryProvider | None
    _session: Session | None
    _sessions: Sessions

    @property
    def session(self) -> Session | None:
        """The active session, or None."""
        return self._session

    @property
    def activated_session(self) -> Session | None:
        """The active session, or None (Agently's name for `session`)."""
        return self._session

    @property
    def sessions(self) -> Sessions:
        """The sessions this agent knows, by id (a dict; set one there to restore it)."""
        return self._sessions

    def activate_session(self, session_id: str | None = None, **settings: Any) -> Session:
        """Make later `run` calls without a conversation id turns of this session.

        The session of an id this agent knows (`sessions`) is reused, with its
        handlers; otherwise a new one is made on the agent's memory and kept there.

        Args:
            session_id: The conversation id (default: a new one).
            settings: Session settings (`Session.configure`): ``max_length``,
                ``input_keys``, ``reply_keys``, ``settings``, or handler settings.

        Returns:
            The active `memoryd.Session`.

        Raises:
            ValueError: The agent has no memory; a bad setting.
            TypeError: A bad setting.
            InvalidConversationId: A bad ``session_id``.
        """
        if self.provider is None:
            raise ValueError(
                "activate_session needs memory (memory='default', memoryd.window(n), a "
                "store, or a MemoryProvider); this agent has memory=False"
            )
        session = self._sessions.get(session_id) if session_id is not None else None
        if session is None:
            session = Session(session_id, self.provider)
            self._sessions[session.id] = session
        if settings:
            session.configure(**settings)
        self._session = session
        return session

    def deactivate_session(self) -> None:
        """Stop using the active session (later runs without an id get a new conversation)."""
        self._session = None

    def _active(self, what: str) -> Session:
        if self._session is None:
            raise ValueError(f"{what} acts on the active session; call activate_session first")
        return self._session

    def set_chat_history(self, messages: Any, *, replace: bool = False) -> Session:
        """`Session.set_chat_history` on the active session.

        Raises:
            ValueError: No session is active.
            ConflictError: The session holds messages and ``replace`` is False.
        """
        return self._active("set_chat_history").set_chat_history(messages, replace=replace)

    def add_chat_history(self, messages: Any) -> Session:
        """`Session.add_chat_history` on the active session.

        Raises:
            ValueError: No session is active.
        """
        return self._active("add_chat_history").add_chat_history(messages)

    def reset_chat_history(self) -> Session:
        """`Session.reset_chat_history` on the active session.

        Raises:
            ValueError: No session is active.
        """
        return self._active("reset_chat_history").reset_chat_history()

    def register_session_analysis_handler(self, handler: Any) -> Session:
        """`Session.register_analysis_handler` on the active session.

        Raises:
            ValueError: No session is active.
        """
        return self._active("register_session_analysis_handler").register_analysis_handler(handler)

    def register_session_resize_handler(self, name: str, handler: Any) -> Session:
        """`Session.register_resize_handler` on the active session.

        Raises:
            ValueError: No session is active.
        """
        return self._active("register_session_resize_handler").register_resize_handler(
            name, handler
        )
