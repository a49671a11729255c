"""The memoryd daemon: an HTTP/JSON API over every store, as a supervised listener.

The only package that imports the web stack (Starlette on uvicorn).
"""

from memoryd.server.application import create_app, openapi
from memoryd.server.config import ServerConfig, parse_listen
from memoryd.server.daemon import run
from memoryd.server.listener import SERVER, Server
from memoryd.server.stores import StoreRegistry

__all__ = [
    "SERVER",
    "Server",
    "ServerConfig",
    "StoreRegistry",
    "create_app",
    "openapi",
    "parse_listen",
    "run",
]
