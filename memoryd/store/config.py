"""StoreConfig: the settings every store has, whatever its backend, as one frozen value.

A backend extends it with its own fields (`memoryd.store.lmdb.config.LmdbConfig`,
`memoryd.store.redis.config.RedisConfig`); a store actor is restarted with the
same value, so a restart reopens exactly the store that was started.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memoryd.messages import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["DEFAULT_CALL_TIMEOUT_S", "StoreConfig", "check_int"]

DEFAULT_CALL_TIMEOUT_S = 10.0


def check_int(value: object, field: str, low: int) -> None:
    """Raise ValueError naming ``field`` unless ``value`` is an int (not a bool) >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{field} must be an int >= {low}, not {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreConfig:
    """How to run one store, whatever keeps its data.

    Attributes:
        name: the registered name.
        max_message_bytes: the largest message accepted (compact JSON, UTF-8).
        call_timeout_s: the deadline of every call made through a handle.
        max_batch: the most writes committed in one transaction (or pipeline).
        max_linger_s: the longest a batch waits for the next write of the writers
            expected from the recent commits (group commit), counted from the latest
            write; 0 commits at once.

    Raises:
        ValueError: a field is out of range (the message names it).
    """

    name: str
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    max_batch: int = 1024
    max_linger_s: float = 0.001

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a store name must be a non-empty str, not {self.name!r}")
        if self.name.startswith("memoryd.agents/"):
            raise ValueError(
                f"store name {self.name!r} starts with 'memoryd.agents/', which is reserved "
                "for the actors of agent systems; choose another name"
            )
        check_int(self.max_message_bytes, "max_message_bytes", 1)
        check_int(self.max_batch, "max_batch", 1)
        linger = self.max_linger_s
        if isinstance(linger, bool) or not isinstance(linger, int | float) or not 0 <= linger <= 1:
            raise ValueError(f"max_linger_s must be a number of seconds in [0, 1], not {linger!r}")
        timeout = self.call_timeout_s
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ValueError(f"call_timeout_s must be a number > 0, not {timeout!r}")
