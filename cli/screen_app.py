"""The game screen's widgets: a thin Textual app that shows what it is given and passes keys on.

Everything a player sees is decided on the trio side (:mod:`seabattle.cli.screen`), which hands
this app whole renderables (:class:`View`) and log lines; the app keeps only what is local to the
terminal: which widget has the focus, the line being edited and its history. What the player does
goes back as events (:data:`Input`): ``("line", text)`` for an entered line, ``("key", name)`` for
a key pressed on a board, ``("quit", "")`` for Ctrl-C or Ctrl-Q.

Focus: the input line has it at first (typed cells, placing commands, with line editing and
Up/Down history); Tab moves it to the board (arrow keys move the cursor, Enter places or fires,
Space turns the ship being placed, or marks a salvo's cells), and typing a letter or digit there
takes it back to the line (so that a command typed on the board is not lost).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, RichLog, Static

__all__ = ["BOARD_KEYS", "InputEvent", "ScreenApp", "View"]

#: What the player did: ``(kind, value)``, kind one of ``line``, ``key``, ``quit``.
InputEvent = tuple[str, str]

#: The keys a board passes on (Textual's names); any other printable key goes to the line.
BOARD_KEYS = frozenset({"up", "down", "left", "right", "enter", "space"})

#: How many lines of its history the input line keeps.
_HISTORY = 200


@dataclass(frozen=True, slots=True)
class View:
    """Everything on the screen but the log: drawn whole whenever anything changes."""

    header: Text
    left: Text
    right: Text
    left_info: Text
    right_info: Text
    message: Text
    prompt: str
    #: What the keys do on the board now (shown while the board has the focus).
    hint: str
    #: The board the cursor is on: ``left`` (ours, while placing) or ``right`` (the target).
    board: str = "right"


def _size(text: Text | None) -> tuple[int, int]:
    lines = text.plain.split("\n") if text is not None else []
    return len(lines), max((len(line) for line in lines), default=0)


class LineInput(Input):
    """The input line, with a history of entered lines on Up and Down."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", show=False),
        Binding("down", "history(1)", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.cursor_blink = False  # each blink is a drawing sent down the line (ssh)
        # Keys typed on the board go to the line before it has the focus: keep them.
        self.select_on_focus = False
        self.history: list[str] = []
        self._at = 0  # where in the history Up and Down are (len(history): the line being typed)
        self._draft = ""

    def remember(self, line: str) -> None:
        """Keep ``line`` (unless blank or the same as the last one) and go back to a new line."""
        if line.strip() and (not self.history or self.history[-1] != line):
            self.history.append(line)
            del self.history[:-_HISTORY]
        self._at = len(self.history)
        self._draft = ""

    async def _on_key(self, event: events.Key) -> None:
        """Enter sends the line here, in the order the keys came: the input's own binding for
        it runs only once the key has bubbled up to the app, and by then the keys typed after
        it may be in the line already (two lines typed in one burst went as one, "A1B1")."""
        if event.key == "enter":
            event.stop()
            event.prevent_default()  # neither Input's key handler nor its binding
            app = self.app
            assert isinstance(app, ScreenApp)
            app.submit(self)

    def action_history(self, step: int) -> None:
        """Show the previous (``-1``) or next (``1``) line of the history."""
        if not self.history:
            return
        if self._at == len(self.history):
            self._draft = self.value
        self._at = max(0, min(len(self.history), self._at + step))
        self.value = self._draft if self._at == len(self.history) else self.history[self._at]
        self.cursor_position = len(self.value)


class Board(Static, can_focus=True):
    """A board (or the placement board): keys for its cursor go to the game, letters to the line."""

    def on_key(self, event: events.Key) -> None:
        app = self.app
        assert isinstance(app, ScreenApp)
        line = app.query_one(LineInput)
        if app.leaving:
            app.exit()
        elif event.key == "enter" and line.value.strip():
            # Keys typed fast can reach the board before the focus has moved to the line: the
            # Enter that ends a typed command submits it.
            event.stop()
            app.submit(line)
        elif event.key in BOARD_KEYS:
            event.stop()
            app.send(("key", event.key))
        elif event.is_printable and event.character:
            event.stop()
            line.focus()
            line.insert_text_at_cursor(event.character)


class ScreenApp(App[None]):
    """The game screen (see the module docstring); :meth:`show` and :meth:`log` draw on it."""

    CSS = """
    Screen { layout: vertical; }
    #header { height: 2; padding: 0 1; }
    #boards { height: auto; }
    .side { width: auto; height: auto; padding: 0 2 0 1; }
    .board { width: auto; height: auto; }
    .board:focus { background: $boost; }
    .info { width: auto; height: auto; }
    #log { height: 1fr; min-height: 3; padding: 0 1; scrollbar-size: 1 1; }
    #message { height: 1; padding: 0 1; }
    #hint { height: 1; padding: 0 1; color: $text-muted; }
    #promptrow { height: 1; padding: 0 1; }
    #prompt { width: auto; }
    LineInput { border: none; height: 1; padding: 0; width: 1fr; }
    LineInput:focus { border: none; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit_game", "leave", priority=True, show=False),
        Binding("ctrl+q", "quit_game", "leave", priority=True, show=False),
        Binding("tab", "switch_focus", "board / line", priority=True, show=False),
        Binding("escape", "board_focus", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        #: Where what the player does goes (set once the game runs; dropped before).
        self.sink: Callable[[InputEvent], None] | None = None
        #: Called once the screen is up (the game starts then).
        self.on_ready: Callable[[], None] | None = None
        #: The game is over: the next key closes the screen.
        self.leaving = False
        self._board = "right"
        self._hint = ""
        self._shown: View | None = None
        self._hint_shown = ""
        #: The widest each side has been in this layout (placing, or the boards): a side never
        #: narrows within it, so a board does not shift when a clock stops or the game ends.
        self._widths = [0, 0]

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Horizontal(id="boards"):
            with Vertical(classes="side"):
                yield Board(id="left", classes="board")
                yield Static(id="left_info", classes="info")
            with Vertical(classes="side"):
                yield Board(id="right", classes="board")
                yield Static(id="right_info", classes="info")
        yield RichLog(id="log", wrap=True, markup=False, auto_scroll=True)
        yield Static(id="message")
        yield Static(id="hint")
        with Horizontal(id="promptrow"):
            yield Static(id="prompt")
            yield LineInput(id="line")

    def on_mount(self) -> None:
        self.query_one(LineInput).focus()
        if self.on_ready is not None:
            self.on_ready()

    def send(self, event: InputEvent) -> None:
        """Pass what the player did on to the game."""
        if self.sink is not None:
            self.sink(event)

    # -- drawing (called by the game) ------------------------------------------------------------

    def show(self, view: View) -> None:
        """Draw ``view``."""
        last = self._shown
        for name in ("header", "left", "right", "left_info", "right_info", "message"):
            # Only what changed, and a new layout only for a new size: most drawings change a
            # clock and nothing else, and every byte goes down the terminal (or the ssh link).
            new: Text = getattr(view, name)
            old: Text | None = None if last is None else getattr(last, name)
            if old is None or old != new:
                self.query_one(f"#{name}", Static).update(new, layout=_size(old) != _size(new))
        self._keep_widths(view, last is None or last.board != view.board)
        if last is None or last.prompt != view.prompt:
            self.query_one("#prompt", Static).update(Text(view.prompt, style="bold"))
        self._shown = view
        self._board = view.board
        self._hint = view.hint
        self._show_hint()

    def _keep_widths(self, view: View, new_layout: bool) -> None:
        for k, side in enumerate(("left", "right")):
            grid: Text = getattr(view, side)
            info: Text = getattr(view, f"{side}_info")
            width = max(_size(grid)[1], _size(info)[1])
            if new_layout or width > self._widths[k]:
                self._widths[k] = width
                # The content's width: the side's padding (CSS) comes on top of it.
                self.query_one(f"#{side}", Board).styles.min_width = width

    def _show_hint(self) -> None:
        # Which of the two has the keys, said in words: a terminal shows no focus ring.
        if self.query_one(LineInput).has_focus:
            hint = "line: type a command (Up/Down: earlier ones); Tab: the board"
        else:
            hint = f"board: {self._hint}; Tab: the line"
        if hint != self._hint_shown:
            self._hint_shown = hint
            self.query_one("#hint", Static).update(Text(hint, style="dim"), layout=False)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._show_hint()

    def log_line(self, renderable: RenderableType) -> None:
        """Add ``renderable`` to the log."""
        self.query_one(RichLog).write(renderable)

    def leave_on_key(self) -> None:
        """The game is over: the board takes the focus, and any key closes the screen."""
        self.leaving = True
        line = self.query_one(LineInput)
        line.disabled = True
        self.query_one("#left", Board).focus()

    # -- input -----------------------------------------------------------------------------------

    def submit(self, line: LineInput) -> None:
        """Send the line typed, and keep it in the history."""
        value = line.value
        line.remember(value)
        line.value = ""
        self.send(("line", value))

    def action_quit_game(self) -> None:
        if self.leaving:
            self.exit()
        else:
            self.send(("quit", ""))

    def action_switch_focus(self) -> None:
        line = self.query_one(LineInput)
        if line.has_focus:
            self.action_board_focus()
        elif not line.disabled:
            line.focus()

    def action_board_focus(self) -> None:
        # The board being played on: ours while placing, the target grid while firing.
        self.query_one(f"#{self._board}", Board).focus()
