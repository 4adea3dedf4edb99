"""The click layer: turns library calls and typed errors into commands."""
