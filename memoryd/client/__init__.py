"""The daemon client: `RemoteStore`, a store handle that talks to ``memoryd serve``.

``remote`` holds the handle and `connect`; ``calls`` the retries and the error
mapping of one call; ``_http`` the socket transport.
"""

from memoryd.client.remote import RemoteStore, connect

__all__ = ["RemoteStore", "connect"]
