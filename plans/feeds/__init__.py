"""Allow and deny lists kept from feeds: files or URLs of addresses and networks, refreshed on a schedule.

``source`` reads a feed (an https:// URL through the SSRF guard of :mod:`quotas.outbound`, or a file in an
allowed directory), ``parse`` turns its text into networks strictly, ``refresh`` stores each good list and
records each failure, keeping the last good list. ``plans.rules`` compiles the lists into the same
:class:`~quotas.formats.acl.AccessList` as the admin's entries.
"""
