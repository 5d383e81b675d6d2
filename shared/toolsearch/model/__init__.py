"""The embedding model: download it (`fetch`), shrink it for Lambda (`prepare`), load it (`load`).

Only `load` (with `unigram`) is needed at run time; `fetch` and `prepare` run at build time
(`toolsearch fetch-model`). The package imports none of its modules, so importing one pulls in
only what that one needs: a Lambda cold start never loads httpx's download code or the writers.
"""
