"""Adapters that plug tether's masks into other runtimes (SPEC §10). Each adapter imports
its framework lazily, so importing this package costs nothing."""
