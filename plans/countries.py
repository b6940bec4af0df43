"""Country codes of per-country limits: ISO 3166-1 alpha-2, as GeoIP2 databases name countries.

An :class:`~plans.models.EndpointLimit` may apply only to requests from some
countries (``countries``, e.g. ``"CN, RU"``). The codes are checked against
the assigned ISO 3166-1 alpha-2 codes (plus ``XK``, Kosovo, which MaxMind's
databases use) so that a typo such as ``UK`` (the United Kingdom is ``GB``)
is refused in the admin rather than matching no request ever.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

#: The 249 assigned ISO 3166-1 alpha-2 codes, and XK (a user-assigned code MaxMind gives Kosovo).
_ASSIGNED = """
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY
    BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK
    FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR
    IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK
    ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM
    PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF
    TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW XK
"""
COUNTRY_CODES = frozenset(_ASSIGNED.split())
_TWO_LETTERS = re.compile(r"[A-Z]{2}")
#: Codes people write for a country whose ISO code differs, with the code to write instead.
_MISTAKES = {"UK": "GB", "EL": "GR"}


def split_countries(value: str) -> list[str]:
    """The codes of a list such as ``"cn, RU;de"``, upper-cased, in the order given (commas, semicolons or
    spaces separate them)."""
    return [code.upper() for code in value.replace(";", ",").replace(",", " ").split()]


def validate_countries(value: str) -> None:
    """Model validator: every code an ISO 3166-1 alpha-2 country code, none twice.

    Raises :class:`~django.core.exceptions.ValidationError` naming each code that is wrong and why.
    """
    codes = split_countries(value)
    problems = []
    for code in dict.fromkeys(codes):
        if code in _MISTAKES:
            problems.append(f"'{code}' is not an ISO 3166-1 code: write {_MISTAKES[code]}")
        elif not _TWO_LETTERS.fullmatch(code):
            problems.append(f"'{code}' is not a two-letter country code")
        elif code not in COUNTRY_CODES:
            problems.append(f"'{code}' is not an assigned ISO 3166-1 alpha-2 code")
    repeated = sorted({code for code in codes if codes.count(code) > 1})
    if repeated:
        problems.append(f"{', '.join(repeated)} given more than once")
    if problems:
        raise ValidationError(
            "; ".join(problems) + ". Give ISO 3166-1 alpha-2 codes separated by commas, e.g. CN, RU.",
            code="invalid_countries",
        )
