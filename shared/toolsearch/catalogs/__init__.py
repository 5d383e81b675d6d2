"""One caller's tools (`Catalog`), the per-caller store (`CatalogStore`) and its shared tier (`cache/`:
DynamoDB).
"""
