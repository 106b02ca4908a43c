"""seabattle.protocol: the sans-IO core of the seabattle protocol (no I/O, no clock, no hidden randomness)."""
