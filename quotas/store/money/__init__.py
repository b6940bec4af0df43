"""The money ledger: what each limit has spent in each period (placeholder, written in the next commit)."""
