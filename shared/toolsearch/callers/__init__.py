"""Who a request comes from: `Caller` and its key, the `Authorization` header read, AWS IAM principals,
and the upstream's refusal as the caller's (`CallerRefused`).
"""
