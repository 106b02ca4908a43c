"""What one side knows during a game: its shots and their results, the opponent's shots at its
own fleet, whose turn it is. Fed with the pure seat's events; read by every engine kind (the
built-in strategies read :attr:`Side.view`, external engines get :meth:`Side.request`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from seabattle.protocol.fleet import Fleet
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.seat_events import IncomingShot, MatchEvent, ShotResult, YourTurn
from seabattle.protocol.targeting import TargetView, feed_view

__all__ = ["Side"]


@dataclass
class Side:
    """One side of one game: ``seat`` playing ``rules`` with ``fleet`` (once placed)."""

    rules: RuleSet
    seat: int
    game: int = 1
    fleet: Fleet | None = None
    #: The opponent's grid as our verdicts showed it (what the strategies read).
    view: TargetView = field(init=False)
    #: Our shots and the opponent's at us, in order.
    shots: list[ShotResult] = field(default_factory=list)
    incoming: list[IncomingShot] = field(default_factory=list)
    #: The call we owe now (``None``: not our turn).
    turn: YourTurn | None = None

    def __post_init__(self) -> None:
        self.view = TargetView(self.rules)

    def feed(self, ev: MatchEvent) -> None:
        """Take one of the seat's events for this game; others are ignored."""
        if isinstance(ev, YourTurn):
            self.turn = ev
        elif isinstance(ev, ShotResult):
            self.turn = None
            self.shots.append(ev)
            feed_view(self.view, self.rules, ev.cells, ev.radar, ev.verdict)
            for c in ev.crossed:
                self.view.crossed(c)
        elif isinstance(ev, IncomingShot):
            self.incoming.append(ev)
