"""The public development benchmark for search: real tool catalogs, requests written by others."""
