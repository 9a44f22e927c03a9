"""Transports: thin drivers that move encoded messages between a client and a Session."""
