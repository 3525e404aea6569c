"""Engines: what turns an optimized FunctionGraph into runnable code, and what they share."""
