"""The country a client address is in, for limits kept to some countries (``QUOTAS['GEOIP_COUNTRY_DB']``).

A GeoIP2 or GeoLite2 Country or City database is opened with MaxMind's
``geoip2`` library (the ``geoip`` extra) the first time a request needs a
country, once per process, and again only when ``QUOTAS`` changes (the
setting's value is compared with the path the open reader was given, and
:mod:`quotas.settings` forgets values on Django's ``setting_changed``). A request
pays for the lookup only when one of the limits it matched is kept to some
countries (:meth:`quotas.rules.snapshot.RequestRules.in_country`).

Without a usable database (the setting unset, ``geoip2`` not installed, the
file missing or not a Country or City database) no country is known, so no
country limit applies: that is said once per process and path in the log and
counted for every request it concerns (``quota_country_limits_skipped_total``).
System checks quotas.E081 and quotas.W082 say so at start-up.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from django.http import HttpRequest

from quotas import metrics
from quotas.fork_safe import ForkSafeLock
from quotas.identity.addresses import IPAddress, client_ip
from quotas.settings import quota_settings

logger = logging.getLogger(__name__)

#: The database types whose records carry ``country.iso_code`` and the geoip2 reader's method that reads them.
_LOOKUPS = (("City", "city"), ("Country", "country"))


@dataclass(frozen=True)
class CountryDatabase:
    """A GeoIP2 database opened for one ``path``, or why it could not be (``reason``, ``problem``)."""

    path: str | None
    reader: Any = None  # a geoip2.database.Reader
    lookup: str = ""  # the reader's method for this database type: "country" or "city"
    reason: str = ""  # one of quotas.metrics.COUNTRY_UNAVAILABLE_REASONS when there is no reader
    problem: str = ""  # what an operator is told when there is no reader

    def country(self, ip: IPAddress) -> str | None:
        """The ISO 3166-1 alpha-2 code of ``ip``'s country; None when the database does not place it."""
        from geoip2.errors import AddressNotFoundError  # installed: there is a reader
        from maxminddb import InvalidDatabaseError

        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # databases file IPv4 clients under their IPv4 address
        try:
            code = getattr(self.reader, self.lookup)(ip).country.iso_code
        except (AddressNotFoundError, InvalidDatabaseError):  # not placed, or a damaged record: not known
            return None
        return code.upper() if isinstance(code, str) else None


def open_database(path: str | os.PathLike[str] | None) -> CountryDatabase:
    """The database at ``path`` opened with geoip2, or a :class:`CountryDatabase` saying why it cannot be."""
    if not path:
        return CountryDatabase(None, reason="unset", problem="QUOTAS['GEOIP_COUNTRY_DB'] is not set")
    shown = os.fspath(path)
    if find_spec("geoip2") is None:
        return CountryDatabase(shown, reason="not_installed", problem="geoip2 is not installed")
    import geoip2.database  # the geoip extra: imported only where a database is configured
    from maxminddb import InvalidDatabaseError

    try:
        reader = geoip2.database.Reader(shown)
    except (OSError, ValueError, InvalidDatabaseError) as exc:
        return CountryDatabase(shown, reason="unreadable", problem=f"{shown} cannot be read as a database: {exc}")
    database_type = reader.metadata().database_type
    lookup = next((method for kind, method in _LOOKUPS if kind in database_type), "")
    if not lookup:
        reader.close()
        problem = f"{shown} is a {database_type} database, not a GeoIP2 or GeoLite2 Country or City one"
        return CountryDatabase(shown, reason="unreadable", problem=problem)
    return CountryDatabase(shown, reader=reader, lookup=lookup)


_lock = ForkSafeLock()
_opened: CountryDatabase | None = None


def database() -> CountryDatabase:
    """This process's database for the path ``QUOTAS['GEOIP_COUNTRY_DB']`` names now: opened on first use, and
    again (the old reader closed) once the setting names another path."""
    global _opened
    setting = quota_settings.GEOIP_COUNTRY_DB
    path = os.fspath(setting) if setting else None
    opened = _opened
    if opened is not None and opened.path == path:
        return opened
    with _lock:  # two threads of a process would otherwise both open it, and both log a failure
        if _opened is not None and _opened.path == path:
            return _opened
        if _opened is not None and _opened.reader is not None:
            _opened.reader.close()
        _opened = open_database(path)
        if _opened.reader is None:
            logger.error(
                "quotas: %s, so limits kept to some countries apply to no request (said once; each such "
                "request is counted in quota_country_limits_skipped_total). Set QUOTAS['GEOIP_COUNTRY_DB'] "
                "to a readable GeoIP2 or GeoLite2 Country or City database (pip install "
                "'django-quota-platform[geoip]').",
                _opened.problem,
            )
        return _opened


def request_country(request: HttpRequest) -> str | None:
    """The country of ``request``'s client address (as :func:`~quotas.identity.addresses.client_ip` resolves it,
    behind trusted proxies too); None when it is not known. Only asked for a request that a limit kept to
    some countries matched."""
    found = database()
    if found.reader is None:
        metrics.observe_country_limits_skipped(found.reason)
        return None
    return found.country(client_ip(request))
