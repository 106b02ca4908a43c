"""seabattle.bots: computer players over the client library.

Strategies (:mod:`.strategies`: where to fire next, from what a
:class:`~seabattle.protocol.targeting.TargetView` shows; :mod:`.posterior`: the sampler behind
``best``), the local simulator that measures them (:mod:`.simulate`, ``seabattle bot --stats``),
fleet placement, by hand or by a strategy (:mod:`.placement`), and a strategy playing a server
match through :mod:`seabattle.client.api` (:mod:`.play`). This package uses the client library;
the library never imports it.
"""
