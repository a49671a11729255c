"""The ``memoryd`` command line: the store's surface for people (``memoryd --help``).

`main` is the console script's entry point (``memoryd = memoryd.cli:main``);
``python -m memoryd.cli`` runs it too.
"""

from memoryd.cli.main import main

__all__ = ["main"]
