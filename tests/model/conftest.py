"""Shared helpers for the model tests."""
