"""Security: principals, authentication backends, the policy (security levels, scopes, per-call verification),
rate limits, the output sanitiser and the tamper-evident audit trail.

Nothing here is imported by a deck that has no policy.
"""
