"""``python -m memoryd``: the same command line as the ``memoryd`` script."""

import sys

from memoryd.cli.main import main

sys.exit(main())
