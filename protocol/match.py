"""A match: a series of games, who fires first in each, and the score.

The first game's first player is always decided by a lot (000: "In a match's first game, a lot
decides"; 002: "a fair random method"); later games follow ``rules.first_player``. When a lot is
needed the shell runs the commit-reveal coin (:func:`.commit.coin_commit`) and passes the result in.
"""

from __future__ import annotations

from typing import Any

from .errors import ErrorCode, Refused
from .game import Game, Outcome, Phase
from .rules import FirstPlayer, MatchKind, RuleSet

__all__ = ["Match"]


class Match:
    """A series of games between seats 0 and 1 under one rule set."""

    def __init__(self, rules: RuleSet, match_id: bytes, *, compact: bool = True) -> None:
        """A match before its first game; ``compact`` is passed to every :class:`Game`."""
        self.rules = rules
        self.compact = compact
        self.match_id = match_id
        self.games: list[Game] = []
        self.scores = [0, 0]
        self.wins = [0, 0]
        self.over = False
        self.winner: int | None = None

    @property
    def game(self) -> Game | None:
        """The current (or last) game."""
        return self.games[-1] if self.games else None

    def needs_lot(self) -> bool:
        """Whether the next game's first player must be drawn by lot."""
        if not self.games or self.rules.first_player is FirstPlayer.LOT:
            return True
        last = self.games[-1]
        if self.rules.first_player is FirstPlayer.ALTERNATE:
            # A game that ended in setup before its lot had no first player to alternate from.
            return last.first is None
        # After a draw there is no loser to fire first: the lot decides again.
        return last.outcome is None or last.outcome.winner is None

    def next_first(self) -> int | None:
        """Who fires first in the next game by the rules, or ``None`` if a lot must decide."""
        if self.needs_lot():
            return None
        last = self.games[-1]
        if self.rules.first_player is FirstPlayer.LOSER:
            assert last.outcome is not None and last.outcome.winner is not None
            return 1 - last.outcome.winner
        assert last.first is not None
        return 1 - last.first

    def new_game(self, first: int | None = None) -> Game:
        """Start the next game; ``first`` is the lot's result if :meth:`needs_lot`, else ignored."""
        if self.over:
            raise Refused(ErrorCode.GAME_OVER, "the match is over")
        if self.games and self.games[-1].phase is not Phase.OVER:
            raise Refused(ErrorCode.WRONG_PHASE, "the current game is not over")
        ruled = self.next_first()
        g = Game(self.rules, self.match_id, len(self.games) + 1, ruled, compact=self.compact)
        if ruled is None and first is not None:
            g.set_first(first)
        self.games.append(g)
        return g

    def game_over(self) -> None:
        """Score the current game once it is over, and end the match when it is decided."""
        g = self.games[-1]
        if g.outcome is None:
            raise Refused(ErrorCode.WRONG_PHASE, "the game is not over")
        self._score(g, g.outcome)
        m = self.rules.match
        played = len(self.games)
        if m.kind is MatchKind.BEST_OF:
            lead = max(self.wins)
            if lead >= m.wins_needed or played >= m.games:
                self._decide(self.wins)
        elif played >= m.games:
            self._decide(self.scores)

    def _score(self, g: Game, o: Outcome) -> None:
        m = self.rules.match
        if o.winner is not None:
            self.wins[o.winner] += 1
        if m.kind in (MatchKind.BEST_OF, MatchKind.VICTORY_POINTS):
            if o.winner is not None:
                self.scores[o.winner] += 1
        elif m.kind is MatchKind.SURVIVAL:
            if o.winner is not None:
                # The winner's unhit ship cells: hits against its own board, from the public record.
                self.scores[o.winner] += self.rules.fleet_cells - g.boards[o.winner].hits
        else:
            for s in (0, 1):
                opp = g.boards[1 - s]
                self.scores[s] += opp.hits + m.sunk_bonus * len(opp.sunk)

    def _decide(self, tally: list[int]) -> None:
        self.over = True
        if tally[0] != tally[1]:
            self.winner = 0 if tally[0] > tally[1] else 1

    def to_dict(self) -> dict[str, Any]:
        """Public summary of the match."""
        return {
            "games": len(self.games),
            "scores": list(self.scores),
            "wins": list(self.wins),
            "over": self.over,
            "winner": self.winner,
        }
