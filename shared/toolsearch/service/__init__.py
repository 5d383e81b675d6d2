"""The five tools for one caller (`ToolService`): search, describe, the calls upstream, results, fair
use, progress.
"""
