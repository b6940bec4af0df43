"""Which due deliveries a dispatch run takes: fairly across subscriptions, and across the lanes of each.

Oldest first alone let one subscription's backlog (150 endpoints, one event each) fill every batch while another
subscription's webhook waited runs behind it. So a claim picks **lanes** (an endpoint or a contact) before
deliveries: the lanes with something due, round robin across their events' subscriptions (each subscription's
oldest lane, then each one's second ..., at most :data:`~notifications.lanes.SHARE` of one subscription), and
then each lane's oldest :data:`DEPTH` deliveries. Two window queries (``ROW_NUMBER() OVER (PARTITION BY ...)``,
which SQLite, PostgreSQL and MariaDB all run), each bounded, so a backlog of any size costs one bounded read.
Events whose subscription is gone (``NULL``) are a group of their own.

Each delivery is then claimed by a conditional ``UPDATE`` (still pending, still due when it was read) that moves
``next_attempt_at`` to the run's lease: only one dispatcher wins it, on any database (SQLite included, where
``SELECT ... FOR UPDATE`` locks nothing). The delivery keeps, in memory, the ``next_attempt_at`` it was read with,
so one left unattempted goes back to its own place in line, not behind what came after it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime

from django.db.models import F, Min, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from .lanes import SHARE
from .models import Delivery

#: Deliveries of one lane taken by one claim, at most (a lane sends them one after another; the run claims
#: again when its lanes run dry).
DEPTH = 10
#: Lanes looked at by one claim, at most.
LANES = 100

Lane = tuple[str, str]  # (group, lane), as :class:`notifications.lanes.Job` names them


def lane_of(endpoint_id: int | None, contact_id: int | None) -> str:
    """The lane of a delivery to ``endpoint_id`` or ``contact_id``: one per endpoint, one per contact."""
    return f"endpoint:{endpoint_id}" if endpoint_id is not None else f"contact:{contact_id}"


def group_of(subscription_id: int | None) -> str:
    """The group of a delivery whose event is of ``subscription_id`` (None: a subscription deleted since)."""
    return f"subscription:{subscription_id}"


def due_at(at: datetime) -> QuerySet[Delivery]:
    """The deliveries due at ``at``."""
    return Delivery.objects.filter(status=Delivery.Status.PENDING, next_attempt_at__lte=at)


def fair_lanes(at: datetime, skip: Collection[str], held: Mapping[str, int], limit: int = LANES) -> list[Lane]:
    """The lanes with a delivery due at ``at`` in the order a claim serves them: round robin across groups
    (each group's lane with the oldest due delivery first), none of ``skip``, and no more of a group than
    :data:`~notifications.lanes.SHARE` less the lanes it holds already (``held``)."""
    endpoints, contacts = _ids(skip)
    rows = (
        due_at(at)
        .exclude(endpoint_id__in=endpoints)
        .exclude(contact_id__in=contacts)
        .values("event__subscription_id", "endpoint_id", "contact_id")
        .annotate(oldest=Min("next_attempt_at"))
        .annotate(place=Window(RowNumber(), partition_by=[F("event__subscription_id")],
                               order_by=[F("oldest").asc(), F("endpoint_id").asc(), F("contact_id").asc()]))
        .filter(place__lte=SHARE)
        .order_by("place", "oldest", "endpoint_id", "contact_id")[:limit]
    )  # fmt: skip
    taken: dict[str, int] = defaultdict(int, held)
    lanes: list[Lane] = []
    for row in rows:
        group = group_of(row["event__subscription_id"])
        if taken[group] < SHARE:
            taken[group] += 1
            lanes.append((group, lane_of(row["endpoint_id"], row["contact_id"])))
    return lanes


def claim(at: datetime, lease: datetime, lanes: list[Lane], room: int) -> list[Delivery]:
    """Claim, until ``lease``, up to ``room`` deliveries due at ``at`` of ``lanes``: each lane's oldest first,
    then each one's second ..., with their events, endpoints and contacts loaded; those another dispatcher
    took meanwhile are left out. Each keeps the ``next_attempt_at`` it was due at (in memory only)."""
    if not lanes or room <= 0:
        return []
    endpoints, contacts = _ids(lane for _, lane in lanes)
    order = {lane: place for place, (_, lane) in enumerate(lanes)}
    candidates = (
        due_at(at)
        .filter(Q(endpoint_id__in=endpoints) | Q(contact_id__in=contacts))
        .annotate(rank=Window(RowNumber(), partition_by=[F("endpoint_id"), F("contact_id")],
                              order_by=[F("next_attempt_at").asc(), F("pk").asc()]))
        .filter(rank__lte=DEPTH)
        .select_related("event", "endpoint", "contact")
    )  # fmt: skip
    ranked = sorted(candidates, key=lambda d: (d.rank, order[lane_of(d.endpoint_id, d.contact_id)]))
    claimed: list[Delivery] = []
    for delivery in ranked[:room]:
        # One conditional UPDATE, which only one dispatcher wins on any database.
        won = Delivery.objects.filter(
            pk=delivery.pk, status=Delivery.Status.PENDING, next_attempt_at=delivery.next_attempt_at
        ).update(next_attempt_at=lease)
        if won:
            claimed.append(delivery)
    return claimed


def _ids(lanes: Iterable[str]) -> tuple[list[int], list[int]]:
    endpoints: list[int] = []
    contacts: list[int] = []
    for lane in lanes:
        kind, _, pk = lane.partition(":")
        (endpoints if kind == "endpoint" else contacts).append(int(pk))
    return endpoints, contacts
