"""Tests of the service bootstrap (arroyo.service), on real servers, sockets and processes."""
