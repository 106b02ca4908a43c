"""Where the bench runs from: the checkout of the source that holds this folder.

``bench/`` is no part of the installed package (h11 keeps its bench beside the package, not in
it): it is a folder at the root of a checkout, imported as ``bench`` with that root on the path
(``python -m bench.X`` run from the root, pytest's ``pythonpath``, or ``seabattle bench``, which
finds the checkout itself: :mod:`seabattle.cli.checkout`). The child processes it starts
(``python -m bench KIND``) get the root on ``PYTHONPATH`` from :func:`child_env`, so that they find
it whatever their working folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ROOT", "child_env"]

#: The root of the checkout: the folder that holds ``bench/``.
ROOT = Path(__file__).resolve().parent.parent


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (this process's environment by default) with :data:`ROOT` first on
    ``PYTHONPATH``: the environment of a child that imports ``bench``."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), out.get("PYTHONPATH")) if p)
    return out
