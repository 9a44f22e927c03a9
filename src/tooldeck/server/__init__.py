"""The server: the Deck (registries and options), sessions (one per client connection) and the tool Context."""
