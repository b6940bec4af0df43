"""Formats every layer reads, with no I/O and no settings: rates (``"5/min"``), money (Decimal and
micro-units), calendar periods and usage days, allow and deny lists."""
