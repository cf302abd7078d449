"""The CuPy photon cluster finder (aare algorithm), its NumPy reference and its data."""
