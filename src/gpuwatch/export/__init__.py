"""Prometheus exposition: metric families, the DCGM-compatible set, the HTTP server."""
