"""The checkout of the source, for the commands that need what only a checkout has.

``bench/`` (the load generator, the measuring scripts and the exact solver of small boards) is no
part of the installed package: it is a folder at the root of the source tree. ``seabattle bench``
and ``seabattle bot --exact`` find it, first from this package's own files (an editable install's
files resolve into the checkout, the links of ``editable_mode=strict`` included), then in the
current folder and its parents; without one they say in one line that they run from a checkout.
The ``bench`` package is loaded from that folder alone, leaving ``sys.path`` as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import click

__all__ = ["NoCheckout", "find_checkout", "load_bench"]


class NoCheckout(click.ClickException):
    """A command that runs from a checkout of the source ran without one."""

    def __init__(self, command: str) -> None:
        super().__init__(
            f"`seabattle {command}` runs from a checkout of the source: its bench/ folder is not"
            " installed (run it inside a clone of the repository)"
        )


def _is_checkout(root: Path) -> bool:
    if not (root / "bench" / "__init__.py").is_file():
        return False
    try:
        return 'name = "seabattle"' in (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return False


def find_checkout() -> Path | None:
    """The root of the checkout this command runs from, or ``None``."""
    here = Path(__file__).resolve().parent.parent  # cli/ -> the root, when it is a checkout
    cwd = Path.cwd()
    for root in (here, cwd, *cwd.parents):
        if _is_checkout(root):
            return root
    return None


def load_bench(command: str, module: str = "bench") -> ModuleType:
    """``module`` (``bench`` or one of its modules) from the checkout's ``bench/``; raises
    :class:`NoCheckout`, naming ``command``, without one."""
    loaded = sys.modules.get("bench")
    if loaded is None:
        root = find_checkout()
        if root is None:
            raise NoCheckout(command)
        folder = root / "bench"
        spec = importlib.util.spec_from_file_location(
            "bench", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        sys.modules["bench"] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            del sys.modules["bench"]
            raise
    return loaded if module == "bench" else importlib.import_module(module)
