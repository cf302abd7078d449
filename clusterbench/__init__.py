"""clusterbench: what a GPU photon cluster-finder pipeline really costs, engine by engine."""

__version__ = "0.1.0"
