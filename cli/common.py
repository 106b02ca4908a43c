"""What the ``seabattle`` commands share: the console, the parsing of their common arguments,
and the client side of a server connection (TLS, a pinned key, errors as one line)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import trio
from rich.console import Console
from seabattle.protocol.rules import PRESETS, BadRules, RuleSet, preset, rules_from_dict

if TYPE_CHECKING:
    from seabattle.client.api import Client

__all__ = [
    "HANDSHAKE_TIMEOUT_OPTION",
    "PORT",
    "Conn",
    "_hostport",
    "_rules_arg",
    "_rules_map",
    "_unwrap",
    "address_arg",
    "connection_options",
    "console",
    "handshake_timeout",
    "key_file_arg",
    "open_client",
    "open_stream",
    "run_client",
]

_F = TypeVar("_F", bound=Callable[..., Any])

console = Console()


def _rules_arg(value: str) -> RuleSet:
    """``--rules`` takes a preset name or a JSON map (``{"preset": "classic", "radar": true}``)."""
    value = value.strip()
    try:
        if value.startswith("{"):
            given = json.loads(value)
            if not isinstance(given, dict):
                raise click.BadParameter(
                    "a preset name or a JSON map ({...})", param_hint="--rules"
                )
            return rules_from_dict(given)
        return preset(value)
    except BadRules as e:
        raise click.BadParameter(e.detail, param_hint="--rules") from None
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"not valid JSON ({e})", param_hint="--rules") from None


def _rules_map(rules: RuleSet) -> dict[str, Any]:
    return {"preset": rules.name} if rules.name in PRESETS else rules.to_dict()


#: A port to listen on: 0 picks a free one. The kernel keeps only the low 16 bits of a larger
#: number, so 99999 would silently listen on 34463; ``serve`` refuses it too.
PORT = click.IntRange(0, 65535)


def _hostport(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for an IPv6 address; no host: 127.0.0.1) as a host and a
    port to connect to, 1..65535; anything else is a :class:`click.BadParameter`."""
    h, sep, p = value.strip().rpartition(":")
    if not sep or not p.isdigit():
        why = "the port is missing" if not sep else f"{p!r} is no port number"
        raise click.BadParameter(f"{value!r} is not HOST:PORT ({why})")
    port = int(p)
    if not 1 <= port <= 65535:
        raise click.BadParameter(f"{value!r}: port {port} is not in 1..65535")
    return h.strip("[]") or "127.0.0.1", port


def address_arg(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for a ``HOST:PORT`` to connect to: checked while the command line is
    read, so that a mistake is a usage error naming the option, before anything connects."""
    if value is not None:
        try:
            _hostport(value)
        except click.BadParameter as e:
            raise click.BadParameter(e.message, ctx, param) from None
    return value


def key_file_arg(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for ``--key FILE``: an existing file must hold an Ed25519 private key,
    and a missing one (created on first use) needs its folder to exist. Nothing is written
    here: the key is made where it is first used."""
    if value is None:
        return None
    from seabattle.common.keys import KeyFileError, load_or_create_key

    path = Path(value)
    try:
        if path.exists():
            load_or_create_key(path)  # loads it: nothing is created for a file that exists
        elif not path.parent.is_dir():
            raise KeyFileError(f"there is no folder {path.parent} for the key file {path.name}")
    except KeyFileError as e:
        raise click.BadParameter(str(e), ctx, param) from None
    except OSError as e:
        raise click.BadParameter(f"cannot read {value}: {e.strerror or e}", ctx, param) from None
    return value


_TIMEOUT_META = "seabattle.handshake_timeout"


def _keep_timeout(ctx: click.Context, param: click.Parameter, value: float | None) -> None:
    if value is not None:
        ctx.meta[_TIMEOUT_META] = value


#: ``--handshake-timeout SECONDS``: how long a command waits for a server (or a peer host) to
#: take the connection and complete the handshake. Not passed to the command: a :class:`Conn`
#: made while it runs carries it (:func:`handshake_timeout`).
HANDSHAKE_TIMEOUT_OPTION = click.option(
    "--handshake-timeout",
    type=click.FloatRange(0, min_open=True),
    default=None,
    metavar="SECONDS",
    expose_value=False,
    callback=_keep_timeout,
    help="Give up on a server that has not completed the handshake in this time [default: 10].",
)


def handshake_timeout() -> float:
    """The running command's ``--handshake-timeout``, else the client library's default."""
    from seabattle.client.wire import HANDSHAKE_TIMEOUT

    ctx = click.get_current_context(silent=True)
    given = None if ctx is None else ctx.meta.get(_TIMEOUT_META)
    return HANDSHAKE_TIMEOUT if given is None else float(given)


def _unwrap(e: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (trio's nurseries wrap them)."""
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


# ================================================================================================
# a connection to a server: --tls, --ca, --server-key, and its errors as one line
# ================================================================================================


@dataclass(frozen=True, slots=True)
class Conn:
    """How a command reaches its server: ``HOST:PORT``, over TLS or not, and the key it pins."""

    server: str
    tls: bool = False
    ca: str | None = None  #: a CA bundle (PEM) to check the server's certificate with
    pin: str | None = None  #: the server key expected: hex, or ``sha256:`` and its digest
    #: seconds to open the connection and complete the handshake (``--handshake-timeout``)
    timeout: float = field(default_factory=handshake_timeout)

    @property
    def hostport(self) -> tuple[str, int]:
        """The server's host and port."""
        return _hostport(self.server)


def connection_options(f: _F) -> _F:
    """Add ``--tls``, ``--ca``, ``--server-key`` and ``--handshake-timeout`` to a command that
    connects to a server; the command gets the first three as ``tls``, ``ca`` and
    ``server_key`` (a :class:`Conn` with ``server``), and a :class:`Conn` made while it runs
    the timeout."""
    f = HANDSHAKE_TIMEOUT_OPTION(f)
    f = click.option(
        "--server-key",
        default=None,
        metavar="KEY",
        help="Pin the server's key: its hex, or sha256:DIGEST (serve --json prints both).",
    )(f)
    f = click.option(
        "--ca",
        default=None,
        type=click.Path(exists=True, dir_okay=False),
        help="Check the server's TLS certificate against this CA bundle (PEM); implies --tls.",
    )(f)
    return click.option(
        "--tls", is_flag=True, help="Connect over TLS (the server has --tls-cert)."
    )(f)


@asynccontextmanager
async def open_client(conn: Conn, **kwargs: Any) -> AsyncIterator[Client]:
    """:func:`~seabattle.client.api.connect` as ``conn`` says; a refusal of the handshake, a
    TLS failure or a key other than the pinned one raises a one-line :class:`click.ClickException`
    that says what to do."""
    from seabattle.client.api import connect
    from seabattle.client.wire import (
        ConnectionClosed,
        HandshakeTimeout,
        KeyFileError,
        RequestFailed,
    )
    from seabattle.protocol.errors import ErrorCode

    host, port = conn.hostport
    tls = conn.tls or conn.ca is not None
    kwargs.setdefault("handshake_timeout", conn.timeout)
    try:
        cm = connect(host, port, stream=await open_stream(conn), tls=tls, **kwargs)
        client = await cm.__aenter__()
    except HandshakeTimeout as e:
        raise click.ClickException(_timed_out(e)) from None
    except KeyFileError as e:
        raise click.ClickException(f"cannot use the key: {e}") from None
    except ConnectionClosed as e:
        cause = _ssl_cause(e)
        if cause is not None:
            raise click.ClickException(
                f"TLS with {conn.server} failed: {_ssl_why(cause)}"
            ) from None
        hint = "" if tls else " (a TLS server? add --tls)"
        why = str(e) or "the connection closed"
        raise click.ClickException(f"{conn.server} ended the handshake: {why}{hint}") from None
    except RequestFailed as e:
        if e.code == ErrorCode.AUTH_FAILED and "registered" in e.msg:
            raise click.ClickException(
                f"{conn.server} admits registered keys only: use --key FILE with a key its"
                " operator added (seabattle keys add)"
            ) from None
        raise click.ClickException(f"{conn.server} refused the handshake: {e}") from None
    except trio.BrokenResourceError as e:
        # trio wraps a failed TLS handshake: its cause says why (a certificate, a plain server).
        broken = e.__cause__ if e.__cause__ is not None else e
        raise click.ClickException(f"TLS with {conn.server} failed: {_ssl_why(broken)}") from None
    try:
        if conn.pin is not None and not _pinned(conn.pin, client.server_key):
            raise click.ClickException(
                f"{conn.server} is not the server pinned by --server-key: its key is"
                f" {client.server_key.hex()}"
            )
        yield client
    except BaseException as e:
        if not await cm.__aexit__(type(e), e, e.__traceback__):
            raise
    else:
        await cm.__aexit__(None, None, None)


async def open_stream(conn: Conn) -> trio.abc.Stream | None:
    """A TLS stream to ``conn``'s server (checked against ``--ca`` if given), or ``None`` for
    plain TCP, which ``connect`` opens itself."""
    if not (conn.tls or conn.ca is not None):
        return None
    from seabattle.client.wire import HandshakeTimeout

    host, port = conn.hostport
    try:
        ctx = ssl.create_default_context(cafile=conn.ca)
    except ssl.SSLError as e:
        raise click.ClickException(
            f"--ca {conn.ca} holds no CA certificate (PEM): {e.reason or e}"
        ) from None
    # Only the TCP connection opens here (TLS shakes hands on the first send, in ``connect``,
    # under its own timeout): bounded all the same, a dropped SYN waits minutes.
    with trio.move_on_after(conn.timeout):
        return await trio.open_ssl_over_tcp_stream(host, port, ssl_context=ctx)
    raise HandshakeTimeout(conn.server, conn.timeout, connected=False)


def _timed_out(e: BaseException) -> str:
    """The line for a :class:`~seabattle.client.wire.HandshakeTimeout`: what happened, and
    what to look at."""
    if getattr(e, "connected", False):
        return f"{e} (a stopped or overloaded server, or not a seabattle server)"
    return f"{e} (nothing answers there: check the address and any firewall)"


def _pinned(pin: str, key: bytes) -> bool:
    pin = pin.strip().lower()
    if pin.startswith("sha256:"):
        return pin.removeprefix("sha256:") == hashlib.sha256(key).hexdigest()
    return pin == key.hex()


def _ssl_cause(e: BaseException) -> ssl.SSLError | None:
    # The wire turns a broken TLS stream into ConnectionClosed; the ssl error is in its causes.
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _ssl_why(e: BaseException) -> str:
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"the certificate does not verify ({e.verify_message}; --ca FILE names the CA)"
    if isinstance(e, ssl.SSLError) and e.reason == "WRONG_VERSION_NUMBER":
        return "the server does not speak TLS (leave out --tls)"
    if isinstance(e, ssl.SSLError):
        return str(e.reason or e)
    return str(e) or type(e).__name__


def run_client(
    conn: Conn, fn: Callable[..., Any], runner: Callable[[Callable[..., Any]], Any] = trio.run
) -> Any:
    """``trio.run(fn)`` (or ``runner(fn)``: the game screen's) for a command talking to
    ``conn``'s server: whatever ends it early is one line on stderr and a non-zero exit (Ctrl-C:
    130), never a traceback."""
    from seabattle.client.wire import ConnectionClosed, HandshakeTimeout, RequestFailed
    from seabattle.protocol.errors import ProtocolError

    try:
        return runner(_sigint_cancels(fn) if runner is trio.run else fn)
    except BaseException as raised:
        e = _unwrap(raised)
        if isinstance(e, KeyboardInterrupt) or _only(raised, KeyboardInterrupt):
            _interrupted()
        if isinstance(e, click.ClickException | click.exceptions.Exit | SystemExit):
            raise e from None
        if isinstance(e, HandshakeTimeout):  # a reconnect's, say: open_client tells the first
            raise click.ClickException(_timed_out(e)) from None
        if isinstance(e, ssl.SSLError):
            raise click.ClickException(f"TLS with {conn.server} failed: {_ssl_why(e)}") from None
        if isinstance(e, OSError):
            raise click.ClickException(f"cannot reach {conn.server}: {e.strerror or e}") from None
        if isinstance(e, ConnectionClosed | RequestFailed | ProtocolError):
            # The session failed (spec 4.5): say why, without a traceback.
            raise click.ClickException(f"the session with {conn.server} failed: {e}") from None
        raise


def _sigint_cancels(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with Ctrl-C turned into a cancellation of it, then :class:`KeyboardInterrupt`.

    Python raises ``KeyboardInterrupt`` wherever the main thread happens to be, trio's own
    code included: between making a coroutine and awaiting it (a "never awaited" warning on
    the way out), or where it is lost. As a cancellation it lands at a checkpoint, cleanup
    (a ``bye`` to the server) runs, and the command ends as interrupted; a second Ctrl-C while
    that cleanup waits ends the process at once."""

    async def run(*args: Any) -> Any:
        body = trio.CancelScope()

        async def watch(signals: AsyncIterator[int]) -> None:
            async for _ in signals:
                if body.cancel_called:
                    click.echo("interrupted", err=True)
                    os._exit(130)
                body.cancel()

        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, signals)
                with body:
                    result = await fn(*args)
                nursery.cancel_scope.cancel()
        if body.cancel_called:
            raise KeyboardInterrupt
        return result

    return run


def _only(e: BaseException, kind: type[BaseException]) -> bool:
    # Ctrl-C inside a nursery may come out beside what it interrupted: it is still Ctrl-C.
    return isinstance(e, BaseExceptionGroup) and e.split(kind)[0] is not None


def _interrupted() -> NoReturn:
    click.echo("interrupted", err=True)
    sys.exit(130)
