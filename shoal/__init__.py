"""Shoal: a self-hosted lakehouse for governed unstructured data and change data."""

__version__ = "0.1.0"
