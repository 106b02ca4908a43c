"""seabattle.client: the reference client (command line, bots, network shell)."""
