"""Metrics (Prometheus), audit log lines, and the signals of budget alerts and bans."""
