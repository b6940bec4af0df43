"""Usage accounting: the decision script's Redis counters, flushed into the database and reported."""
