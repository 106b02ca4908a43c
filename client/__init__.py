"""seabattle.client: the client library.

The scripting API (:mod:`.api`: :func:`~.api.connect` and the :class:`~.api.Client`, with the
lobby's requests in :mod:`.lobby` and getting back in after a drop or a redirect in
:mod:`.rejoin`), one match (:mod:`.match`: a trio shell over the pure
:class:`~seabattle.protocol.seat.Seat`), the typed events (:mod:`.events`), framing and keys
(:mod:`.wire`) and peer play (:mod:`.peer`: a shell over :mod:`seabattle.protocol.peer`). It
depends on the protocol core and :mod:`seabattle.common` only: the bots (:mod:`seabattle.bots`),
the command line (:mod:`seabattle.cli`) and the conformance suite (:mod:`seabattle.conformance`)
are packages of their own.
"""
