"""The books both test schemas serve."""

BOOKS = [
    {"title": "Dune", "author": {"name": "Herbert"}},
    {"title": "Emma", "author": {"name": "Austen"}},
]
