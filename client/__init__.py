"""seabattle.client: the client library.

The scripting API (:mod:`.api`: :func:`~.api.connect` and the :class:`~.api.Client`, with the
lobby's requests in :mod:`.lobby`), one match and its mirror of the referee (:mod:`.match`), the
typed events (:mod:`.events`), framing and keys (:mod:`.wire`), peer play (:mod:`.peer`) and what
an attacker knows of the opponent's grid (:mod:`.targeting`). It depends on the protocol core and
:mod:`seabattle.common` only: the bots (:mod:`seabattle.bots`), the command line
(:mod:`seabattle.cli`) and the conformance suite (:mod:`seabattle.conformance`) are packages of
their own.
"""
