"""Test doubles for the agentloop test suite."""
