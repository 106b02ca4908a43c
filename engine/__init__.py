"""Bots in any language: the engine protocol's shells (spec/engine.md).

An *engine* only chooses: where its fleet lies and where to fire, from what its side knows. It
never sees a salt, a commitment or a proof. The pure seat (:mod:`seabattle.protocol.seat`) plays
the protocol honestly on its behalf, through the bridge (a server match or peer play, over the
client library) or the arena (many engines against each other on the pure referee, in process,
or through a real server).

- :mod:`.base`: the :class:`~.base.Engine` interface every engine kind implements, the
  :class:`~.base.Move` it returns and the :class:`~.base.EngineFault` that loses it a game;
- :mod:`.side`: what one side knows during a game, fed with the seat's events, and the
  ``move`` request an external engine is sent;
- :mod:`.lines`: the protocol's lines (spec/engine.md), read strictly: what an engine may answer;
- :mod:`.builtin`, :mod:`.process`, :mod:`.http`: the engine kinds (the built-in strategies,
  a program on stdin/stdout, an HTTP service);
- :mod:`.bridge`: an engine playing a server match or peer play through the client library;
- :mod:`.arena`, :mod:`.sprt`, :mod:`.report`: round robins and gauntlets on paired boards,
  Elo and SPRT, and the HTML report.
"""
