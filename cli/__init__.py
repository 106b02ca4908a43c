"""seabattle.cli: the ``seabattle`` command line (:mod:`.main`) and the terminal game.

A shell over the client library (:mod:`seabattle.client`), the bots (:mod:`seabattle.bots`), the
conformance suite (:mod:`seabattle.conformance`) and, for ``serve`` and ``demo``, the server.
``seabattle bench`` and ``seabattle bot --exact`` use the checkout's ``bench/`` folder, which is
no part of the installed package.
"""
