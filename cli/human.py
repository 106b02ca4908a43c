"""A person at the terminal, in peer play (:class:`ConsolePlayer`) or on a server (play_server).

Both shells hand the talking to one :class:`~seabattle.cli.tui.GameUI`, the game screen
(:class:`~seabattle.cli.screen.ScreenUI`) or the line mode
(:class:`~seabattle.cli.tui.TerminalUI`): the rules and any house rule first, then each game's
placement ship by ship, both grids for every shot, every result and refusal explained, and at the
end the reason and both fleets. The shells tell it the state after every change (``show``); the
line mode draws it when it asks for a shot, the screen at once.

In refereed play the match's events arrive while the person is typing (the opponent's shots, the
clock running out, the game ending on a forfeit), so every prompt runs as its own task: a new
prompt, or an event that makes the current one moot, cancels it.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import trio
from rich.console import Console
from rich.text import Text
from seabattle.client.events import (
    GameEnded,
    GameStarted,
    IncomingShot,
    Info,
    LieDetected,
    MatchEnded,
    MatchEvent,
    Refused,
    Said,
    ShotResult,
    YourTurn,
)
from seabattle.client.match import MatchHandle, RunningClock
from seabattle.client.peer import Move, Player
from seabattle.client.wire import ConnectionClosed, RequestFailed
from seabattle.protocol import messages as m
from seabattle.protocol.errors import ErrorCode, ProtocolError
from seabattle.protocol.fleet import Fleet
from seabattle.protocol.game import Game, Phase
from seabattle.protocol.rules import RuleSet
from seabattle.protocol.verdict import Result, Shot, Verdict

from .render import seat_names
from .tui import ClockSource, GameUI, LineReader, Quit, TerminalUI, describe_verdict

__all__ = ["ConsolePlayer", "play_server"]

_LOST = {
    "clock": "the shot clock ran out",
    "repeat": "that cell was fired at already (strict repeat rule)",
}


def _first_line(game: Game, seat: int) -> str:
    who = "you fire" if game.first == seat else "your opponent fires"
    return f"game {game.number}: both fleets are committed; {who} first"


def _again(rules: RuleSet, v: Verdict) -> bool:
    return rules.hit_again and any(r.result is not Result.MISS for r in v.results)


class ConsolePlayer(Player):
    """A person at the terminal playing one side of a peer match."""

    def __init__(
        self,
        console: Console | None = None,
        read: LineReader | None = None,
        ui: GameUI | None = None,
    ) -> None:
        self.ui: GameUI = ui or TerminalUI(console, read)
        self.current: Fleet | None = None
        self._rules_shown = False

    async def fleet(self, rules: RuleSet, game: int) -> Fleet:
        """Show the rules (once), then place the fleet ship by ship."""
        if not self._rules_shown:
            self.ui.show_rules(rules, peer=True)
            self._rules_shown = True
        self.current = await self.ui.place(rules, game)
        self.ui.say("waiting for your opponent's fleet")
        return self.current

    async def move(self, game: Game, seat: int, view: Any) -> Move:
        """Both grids, then a typed move, or ``resign`` (which the other peer is sent, 6.7)."""
        move = await self.ui.move(game, seat, self.current, can_resign=True)
        return ("resign", []) if move is None else move

    def refused(self, error: ProtocolError) -> None:
        """Explain why our own referee refused the move; :meth:`move` asks again."""
        self.ui.refused(error.code, error.detail)

    def started(self, game: Game, seat: int) -> None:
        """Say who fires first."""
        self.ui.show(game, seat, self.current)
        self.ui.say(_first_line(game, seat), "bold")
        if game.first != seat:
            self.ui.say("waiting for your opponent's shot")

    def shot_answered(self, game: Game, seat: int, shot: Shot, verdict: Verdict) -> None:
        """Say what our shot found."""
        self.ui.show(game, seat, self.current)
        self.ui.say("you fired: " + describe_verdict(game.rules, shot.cells, shot.radar, verdict))
        if game.phase is Phase.FIRING and game.turn == seat and _again(game.rules, verdict):
            self.ui.say("a hit shoots again (house rule)", "yellow")
        elif game.phase is Phase.FIRING:
            self.ui.say("waiting for your opponent's shot")

    def shot_at(self, game: Game, seat: int, shot: Shot, verdict: Verdict) -> None:
        """Say what the opponent's shot found."""
        text = describe_verdict(game.rules, shot.cells, shot.radar, verdict)
        self.ui.show(game, seat, self.current)
        self.ui.say("your opponent fired: " + text)

    def shot_lost(self, game: Game, seat: int, loser: int, why: str) -> None:
        """Say whose shot was lost, and why."""
        who = "your" if loser == seat else "your opponent's"
        self.ui.show(game, seat, self.current)
        self.ui.say(f"{who} shot is lost: {_LOST.get(why, why)}", "yellow")

    def game_over(self, game: Game, seat: int) -> None:
        """The reason, then both fleets with every shot on them."""
        assert game.outcome is not None
        theirs = game.reveals[1 - seat]
        their = theirs.fleet if theirs is not None else None
        self.ui.game_over(game.number, game, seat, game.outcome.to_dict(), self.current, their)


# ================================================================================================
# Refereed play
# ================================================================================================


class _Refereed:
    """One match on a server, played by hand: events in, prompts out (see the module docstring)."""

    def __init__(self, ui: GameUI, match: MatchHandle) -> None:
        self.ui = ui
        self.match = match
        ui.chat = self._chat  # 'say TEXT' at the shot prompt (spec 6.9.4)
        self.fleet: Fleet | None = None
        self.turn: YourTurn | None = None  #: the turn we owe a move for
        self.sent: str | None = None  #: what we sent last and may be refused: "move" or "place"
        self.their_fleet_placed = False
        #: The opponent's fleet as a ``revealed`` showed it, and the game it ended last.
        self.their_fleet: Fleet | None = None
        self.ended = 0
        self._names: list[str] = []  #: the seats' names the UI was told
        self._scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None

    @property
    def seat(self) -> int:
        assert self.match.seat is not None
        return self.match.seat

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            async for ev in self.match.events():
                self.on_event(ev)
                self.name_seats()
                self.ui.show(self.match.mirror, self.seat, self.fleet)
            self._cancel_prompt()

    def name_seats(self) -> tuple[str, str]:
        """Tell the UI both seats' names (and ratings) as far as the server has given them, short
        player ids otherwise (they may come after ``start``); ours, then theirs."""
        match = self.match
        names = seat_names(
            match.players, getattr(match, "names", None), getattr(match, "ratings", None)
        )
        me, them = names[self.seat], names[1 - self.seat]
        if names != self._names:
            self._names = names
            self.ui.match(
                f"match {match.id.hex()[:12]} · {me} vs {them} · {match.mode}",
                lambda: match.clock,
                names,
            )
        return me, them

    # -- chat ------------------------------------------------------------------------------------

    def _chat(self, line: str) -> None:
        # Sent beside the prompt, which goes on waiting for the move.
        assert self._nursery is not None
        self._nursery.start_soon(self._say, line)

    async def _say(self, line: str) -> None:
        try:
            await self.match.say(line)
        except RequestFailed as e:
            self.ui.refused(e.code, e.msg)
        except ConnectionClosed:
            pass  # the match's events say so

    # -- prompts ---------------------------------------------------------------------------------

    def _prompt(self, ask: Callable[[], Awaitable[None]]) -> None:
        self._cancel_prompt()
        scope = self._scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                try:
                    await ask()
                except Quit:
                    # Leaving mid-game gives it up at once rather than let the clock run it out.
                    with trio.CancelScope(shield=True), suppress(ConnectionClosed):
                        g = self.match.mirror
                        if g is not None and g.phase is not Phase.OVER:
                            await self.match.resign()
                    raise

        assert self._nursery is not None
        self._nursery.start_soon(run)

    def _cancel_prompt(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None

    def _clock(self, kind: str) -> ClockSource:
        def ours() -> RunningClock | None:
            c = self.match.clock
            if c is None or c.kind != kind or c.game != self.match.game_no:
                return None
            return c if c.seat is None or c.seat == self.seat else None

        return ours

    async def _place(self) -> None:
        rules = self.match.rules
        assert rules is not None
        self.fleet = await self.ui.place(rules, self.match.game_no, self._clock("setup"))
        self.sent = "place"
        await self.match.place(self.fleet)
        if not self.their_fleet_placed:
            self.ui.say("waiting for your opponent's fleet")

    async def _move(self) -> None:
        turn = self.turn
        rules = self.match.rules
        assert turn is not None and rules is not None
        g = self.match.mirror or Game(rules, self.match.id, self.match.game_no)
        move = await self.ui.move(
            g,
            self.seat,
            self.fleet,
            self._clock("shot"),
            can_resign=True,
            count=turn.count,
            radar=turn.radar,
        )
        if move is None:
            await self.match.resign()
            return
        kind, cells = move
        self.sent = "move"
        if kind == "radar":
            await self.match.radar(cells[0])
        else:
            await self.match.fire(cells)

    # -- events ----------------------------------------------------------------------------------

    def on_event(self, ev: MatchEvent) -> None:
        """Tell the person what ``ev`` means, and ask for what it calls for."""
        ui, rules = self.ui, self.match.rules
        assert rules is not None
        if isinstance(ev, GameStarted):
            self.fleet, self.turn, self.sent = None, None, None
            self.their_fleet_placed, self.their_fleet = False, None
            ui.say(f"game {ev.game} begins", "bold")
            if not self.match.captain:
                ui.say("your team's captain places the fleet")
            elif not self.match.placed:
                self._prompt(self._place)
        elif isinstance(ev, YourTurn):
            self.turn = ev
            self._prompt(self._move)
        elif isinstance(ev, Refused):
            ui.refused(ev.code, ev.msg)
            if self.sent == "move" and self.turn is not None:
                self._prompt(self._move)
            elif self.sent == "place" and ev.code == ErrorCode.ILLEGAL_FLEET:
                self._prompt(self._place)
        elif isinstance(ev, ShotResult):
            self.turn = None
            ui.say("you fired: " + describe_verdict(rules, ev.cells, ev.radar, ev.verdict))
            if ev.crossed:
                ui.say("crossed out: " + " ".join(c.label() for c in ev.crossed), "dim")
            mirror = self.match.mirror
            if _again(rules, ev.verdict) and mirror is not None and mirror.turn == self.seat:
                ui.say("a hit shoots again (house rule)", "yellow")
            elif mirror is not None and mirror.phase is Phase.FIRING:
                ui.say("waiting for your opponent's shot")
        elif isinstance(ev, IncomingShot):
            v = ev.verdict
            text = describe_verdict(rules, ev.cells, ev.radar, v) if v else "(no verdict)"
            ui.say("your opponent fired: " + text)
        elif isinstance(ev, LieDetected):
            who = "the server" if ev.seat is None else "you" if ev.seat == self.seat else "they"
            ui.say(f"LIE DETECTED ({ev.source}): {who}: {ev.detail}", "bold red")
        elif isinstance(ev, GameEnded):
            self._cancel_prompt()
            self.turn = None
            end = ev.mirror
            theirs = end.reveals[1 - self.seat] if end is not None else None
            outcome = dict(ev.outcome)
            fleet = ev.fleet or self.fleet
            their = theirs.fleet if theirs is not None else self.their_fleet
            self.ended = ev.game
            ui.game_over(ev.game, end, self.seat, outcome, fleet, their)
        elif isinstance(ev, MatchEnded):
            self._cancel_prompt()
            self._match_over(ev)
        elif isinstance(ev, Said):
            me, them = self.name_seats()
            who = "you" if ev.mine else them if ev.seat != self.seat else f"{me} (your team)"
            # A Text, never markup: the line is the other player's, whatever it holds.
            self.ui.say(Text(f"{who}: {ev.line}", style="cyan"))
        elif isinstance(ev, Info):
            self._info(ev.message)

    def _info(self, msg: m.Message) -> None:
        ui = self.ui
        if isinstance(msg, m.ShotLost):
            if msg.seat == self.seat:
                self._cancel_prompt()
                self.turn = None
                ui.say(f"your shot is lost: {_LOST.get(msg.why, msg.why)}", "yellow")
            else:
                ui.say(f"your opponent's shot is lost: {_LOST.get(msg.why, msg.why)}", "yellow")
        elif isinstance(msg, m.OpponentStatus):
            if msg.present:
                ui.say("your opponent is back", "yellow")
            else:
                ui.say(f"your opponent left; {msg.grace} s to come back", "yellow")
        elif isinstance(msg, m.Committed):
            if msg.seat != self.seat:
                self.their_fleet_placed = True
                ui.say("your opponent's fleet is placed")
        elif isinstance(msg, m.Firing):
            g = self.match.mirror
            if g is not None:
                self.ui.say(_first_line(g, self.seat), "bold")
                if msg.first != self.seat:
                    self.ui.say("waiting for your opponent's shot")
        elif isinstance(msg, m.Revealed):
            self._revealed(msg)
        elif isinstance(msg, m.RevealNow):
            ui.say("the last ship is down: both fleets are revealed and checked")
        elif isinstance(msg, m.Turn) and self.match.team_play:
            # Team play (spec 6.8): the referee names who calls; say it unless it is us.
            names = self.match.teams.get(msg.seat, ())
            who = names[msg.member][:12] if msg.member < len(names) else f"member {msg.member}"
            if msg.seat == self.seat and msg.member != self.match.member:
                ui.say(f"your teammate {who} calls this turn", "dim")
            elif msg.seat != self.seat:
                ui.say(f"their member {who} calls", "dim")

    def _revealed(self, msg: m.Revealed) -> None:
        # The opponent's fleet, to be drawn on their board: one the referee found at fault is
        # not the fleet played against, and is left out.
        from seabattle.protocol.commit import Reveal

        if msg.seat == self.seat or msg.fault or msg.game != self.match.game_no:
            return
        rules = self.match.rules
        try:
            fleet = Reveal.from_dict(msg.reveal).fleet
            if rules is not None:
                fleet.validate(rules)  # a fleet that breaks the rules is not the one played
        except (ProtocolError, ValueError, KeyError, TypeError, IndexError):
            return
        self.their_fleet = fleet
        if self.ended == msg.game:  # it came after the game's end (a resignation, say)
            self.ui.revealed(msg.game, 1 - self.seat, fleet)

    def _match_over(self, ev: MatchEnded) -> None:
        r = ev.result
        head = "you won the match" if ev.won else "a drawn match" if ev.won is None else "you lost"
        wins = r.get("wins")
        score = ""
        if isinstance(wins, builtins.list) and len(wins) == 2:
            score = f" ({wins[self.seat]}-{wins[1 - self.seat]} in games)"
        self.ui.say(f"match over: {head}{score}", "bold")
        me = self.match.players[self.seat] if len(self.match.players) == 2 else None
        rating = (ev.ratings or {}).get(me) if me else None
        if isinstance(rating, dict):
            self.ui.say(f"rating {rating.get('old')} -> {rating.get('new')}")
        self.ui.say(f"signed record: match {self.match.id.hex()} (seabattle verify checks it)")


async def play_server(
    host: str,
    port: int,
    *,
    rules: dict[str, Any],
    mode: str,
    key: str | None,
    name: str,
    console: Console,
    invite: str | None = None,
    read: LineReader | None = None,
    stream: trio.abc.Stream | None = None,
    placement: str = "uniform",
    create: bool = False,
    at_end: Callable[[MatchHandle], Awaitable[None]] | None = None,
    ui: GameUI | None = None,
    public: bool = False,
) -> bool | None:
    """Play one match on a server by hand (quick match, or join ``invite``); did we win?

    ``read`` replaces standard input and ``stream`` the TCP connection (tests drive both);
    ``placement`` is the strategy the placing command ``random`` uses (``placement.PLACEMENTS``).
    ``create``: open a private match and say its invitation code (``public``: a public one,
    that ``seabattle matches`` lists, and say its id). ``at_end`` runs on the match
    once it has ended, before the connection closes (``play --save`` fetches the record there).
    ``ui`` replaces the line mode (``console``, ``read``, ``placement``): the game screen.
    """
    from seabattle.client.api import connect

    if ui is None:
        ui = TerminalUI(console, read, placement=placement)
    async with connect(host, port, key=key, name=name, stream=stream) as client:
        ui.say(f"connected as {client.player[:16]}...; waiting for an opponent")
        if create:
            match, code = await client.create(rules, mode, public=public)
            if public:
                ui.say(
                    f"open match {match.id.hex()}: listed by seabattle matches; "
                    f"an opponent runs seabattle play --join {match.id.hex()}"
                )
            if match.team_invites is not None:
                mine, theirs = match.team_invites
                ui.say(
                    f"team invitations: your team {mine}, the other team {theirs}: "
                    f"each player runs seabattle play --join CODE"
                )
            elif not public:
                ui.say(f"invitation code {code}: your opponent runs seabattle play --join {code}")
        else:
            match = await (client.join(invite) if invite else client.quick(rules, mode))
        await match.wait_started()
        assert match.rules is not None and match.seat is not None
        refereed = _Refereed(ui, match)
        me, them = refereed.name_seats()
        ui.say(f"match {match.id.hex()}: you are {me}, against {them}, {match.mode} mode", "bold")
        if match.team_play:
            role = "its captain" if match.captain else f"member {match.member}"
            ui.say(f"team play: you are {role} of seat {match.seat}'s team")
        ui.show_rules(match.rules)
        left = False
        try:
            await refereed.run()
        except* Quit:
            left = True
        if left:
            ui.say("you left the match")
            return False
        if match.result is None:
            ui.say("the connection closed before the match ended", "red")
        elif at_end is not None:
            await at_end(match)
    w = match.result.get("winner") if match.result is not None else None
    return None if w is None else w == match.seat
