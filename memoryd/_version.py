"""The version of memoryd, read by setup.cfg (`version = attr: memoryd._version.__version__`)."""

__version__ = "0.1.0.dev0"
