"""What limits apply: the in-process rules snapshot, its cache, rates, calendar periods, access lists, money."""
