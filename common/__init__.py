"""seabattle.common: what the server and the client both use and neither owns.

The server's key file and the direct socket I/O live here so that the client library depends on
the protocol core and on this package only, never on the server: ``seabattle.client`` never
imports ``seabattle.server``; the command line (``seabattle.cli``: ``serve``, ``demo``) and the
bench's targets start a server, lazily, inside functions.
"""
