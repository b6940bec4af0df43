"""The self-service API, one module per resource (keys, webhooks, contacts, caps), on :class:`base.ConsoleView`."""
