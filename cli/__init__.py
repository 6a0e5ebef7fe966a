"""The ``arroyo`` command."""
