"""``python -m bench``: the entry of the bench's child processes.

``KIND WORKDIR [PROFILE]`` serves the server under test or a baseline until SIGTERM; ``verify
FILE`` times record verification (see :func:`.children._child_main`). The bench starts these
itself; they are not a command for people (that is ``seabattle bench``).
"""

from __future__ import annotations

import sys

from .children import _child_main

if __name__ == "__main__":
    _child_main(sys.argv[1:])
