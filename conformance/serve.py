"""The client side of the conformance suite: a scripted server that tests a client.

Theory of operation. ``seabattle conformance --serve -- CLIENT_CMD...`` runs each client case on
a fresh listener (127.0.0.1, port 0), starts the client under test with ``{host}`` and
``{port}`` substituted in its command, and plays the server's side of the connection itself
(:mod:`.serve_stage`): the handshake, a lobby that grants whatever match the client asks for
(``quick``, ``create`` or ``join``), and a match refereed by the reference
:class:`~seabattle.protocol.referee.Referee` against an honest opponent the suite plays
(:mod:`.serve_script`). A case judges what the client sent: its handshake, its pongs, its moves, the
proofs of its verdicts, its reveal and whether it co-signed; a lying case alters one message the
client is sent (a forged opening, a commitment that is not the one committed) and passes only when
the client refuses to co-sign. With ``--peer`` the command is a joining peer and the suite hosts
a peer match (6.7). Each case quotes its sentence, as the server side does (:mod:`.serve_cases`).
"""

from __future__ import annotations

from .serve_cases import CLIENT_CASES, ClientCase, client_case
from .serve_runner import run_client_case, run_client_suite
from .serve_stage import Launcher, Remote, Stage, command_launcher

__all__ = [
    "CLIENT_CASES",
    "ClientCase",
    "Launcher",
    "Remote",
    "Stage",
    "client_case",
    "command_launcher",
    "run_client_case",
    "run_client_suite",
]
