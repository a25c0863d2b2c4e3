"""The ``aws`` scheduler backends."""
