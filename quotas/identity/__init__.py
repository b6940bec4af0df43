"""Who is calling: clients by API key, user or address, and the limits on failed authentications."""
