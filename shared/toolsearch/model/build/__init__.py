"""The model's build steps: `fetch`, `prepare`, `manifest`, `finetune`. Never imported at run time
(BUILD_TIME_ONLY of scripts/lambda_build.py).
"""
