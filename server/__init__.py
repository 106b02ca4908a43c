"""seabattle.server: the trio shell that referees matches, persists them and keeps the ladder."""
