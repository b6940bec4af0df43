"""What a client sees: the middleware, rate-limit headers, problem+json bodies, /healthz and /metrics."""
