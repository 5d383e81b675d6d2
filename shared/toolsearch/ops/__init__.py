"""Logs, metrics, the request's deadline, bounded maps and task helpers: what every layer uses; imports
nothing of the package.
"""
