"""The money ledger: the one owner of money state once a request has been decided.

(Not the metrics ledger of :mod:`quotas.observability.ledger`.) A *limit* here is a plan's budget, a
customer's cap, a key's own cap or a period quota: each has its own counter in each calendar period, and its own
alert levels. Money state is, per limit and period, three things: what was spent, what is reserved in flight,
and which alert levels were reached.

Where it is kept
----------------

In Redis (the keys: :mod:`quotas.contract.keys`; the state's format: the header of ``period.lua``):

- **Spend, reservation and alert levels** share one field of the client's bucket hash, ``<prefix>:{b<n>}``,
  named ``<client>|<limit id>:<algorithm><seconds>``, whose value is
  ``<period end us>:<used>:<alert level>:<reserved>:<limit>[:<others>]``. ``used`` is what the period was
  charged, including estimates of requests not settled yet. ``reserved`` is the part of ``used`` that live
  allowances hold for requests they have not admitted yet. Committed spend is ``used - reserved``. The level
  (1 = 80 %, 2 = 100 %) belongs to the amount ``limit``; ``others`` keeps the levels of other amounts that
  limited the same counter this period (a customer's cap lowering a budget shares the budget's counter).
  Written by ``decide.lua`` through ``period.lua`` (the estimate charged, an allowance's later requests
  reserved, the level its committed spend reached, a budget's 100 % at its first refusal in the period), by
  ``adjust.lua`` (a settlement: the actual cost in place of the estimate; an allowance's end: its unused part
  given back and its reservation released; owed spend charged) and by ``refund.lua`` (a period quota's units
  after a server error; a budget's estimate is released by ``adjust.lua``, with an actual cost of 0).
- **Settlement marks**: ``<prefix>:{b<n>}:s:<settlement id>``, set by ``adjust.lua`` for
  ``SETTLEMENT_MEMORY`` seconds, holding the thresholds the settlement reported: a retry changes nothing and
  reports them again.
- **Billed usage**: the ``c`` (cost) counter of the usage hash of the budget day,
  ``<prefix>:{b<n>}:u:<YYYYMMDD>``, counted by ``decide.lua`` (the estimate), ``adjust.lua`` (the difference)
  and ``usage_add.lua`` (what this process counted without Redis).

In this process, this package:

- :mod:`~quotas.store.money.settlement` (``Settlement``, the guard's ``settlement``): what follows the view:
  refunds, the actual cost charged once (``adjust.lua``, with a settlement id), a decision taken back, owed
  spend charged (and, no money but also after the view, the end of a request's concurrency leases);
- :mod:`~quotas.store.money.owed`: budget spend Redis has not seen yet (a settlement that met an outage, what
  the local fallback admitted), charged by the poller once Redis answers;
- :mod:`~quotas.store.money.owed_spool`: what is still owed at exit, in a signed spool file, charged by the
  next process, each entry once;
- :mod:`~quotas.store.money.budget_day`: the day a moment belongs to, where budget days begin
  (``BUDGET_TIME_ZONE``): the day of the usage key, for the scripts and for usage counted in this process.

Elsewhere, by design: the decision's side stays on the request path (``quotas.store.decision``: a decision's
budget specs, the spans and states a settlement reports; ``allowances.py``, which admits from a reservation;
``in_process_usage.py``, which ends allowances through ``adjust.lua``; ``fallback.py``, which owes its spend
here). Alerts are sent above the store: ``quotas.decide.settling`` and ``quotas.observability.events`` (a
subscription's own thresholds, recorded once by ``notifications.thresholds``). This ``__init__`` imports
nothing, so the store's usage modules may read :mod:`~quotas.store.money.budget_day` without a cycle.

The invariants
--------------

As docs/concepts.md ("The money invariants") states them:

- **Spend and billed usage are the sum of the charged actual costs.** A request's estimate is charged at the
  decision and replaced by its actual cost at settlement (``adjust.lua``), once: a settlement carries an id
  Redis remembers, so a retry after a lost reply changes nothing and reports the thresholds the lost reply
  carried, and their alerts are sent once, by the retry. A settlement Redis could not take waits in the
  process and, at exit, in a signed spool file.
- **A refused request is charged nothing.** A refusal consumes no window; a request one throttle class admitted
  and a later one refused is withdrawn after the response; a server error gives its estimate back.
- **Each limit stays within its bound**: its amount, plus what in-flight requests cost above their estimates
  (and, with allowances, the share each process may hold).
- **An alert is sent once per limit, period and threshold, only when committed spend reached it**, with that
  spend and the limit's currency (or its unit, for a period quota). Levels are stored per limit with the
  counter's state; an allowance's reservation raises none. A subscription's own thresholds are judged the same
  way, from the committed spend before and after each settlement, and recorded once per limit, period and
  percent.
- **Events follow the spend**: an admitted request reports its thresholds (the platform's and the
  subscription's own, in the order of their percents) when it is settled; an allowance's, when it ends.
"""
