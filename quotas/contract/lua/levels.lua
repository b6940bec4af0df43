-- Settling a period's state after its decision (refund.lua, adjust.lua): which stored state is the decision's
-- period, and what becomes of the alert level the decision raised. Kept out of period.lua, which every decision
-- runs (decide's EVAL form defines each of its functions on every call); settling is not the request's path.

-- Whether the state named `named` (parse_period_state's name, never before `pend`) is of a later period than
-- the decision's, which ends at `pend` (a period `span` long): it is not the decision's to change. A state
-- named by an end within half a period after the decision's is the decision's period under another
-- BUDGET_TIME_ZONE (moved east: the end moved earlier, the state keeps its later name), as decide reads it
-- (parse_period_state carries it), and so kept under its name.
local function later_period(named, pend, span)
  return named ~= pend and (named - pend) * 2 >= span
end

-- The level before a request whose own alert mask is `own` raised it (to 2 with bit 2, else to 1), and
-- that level. -> before, raised_to (level, level for a request that raised nothing)
local function raised_by(own, level)
  if own >= 2 then return (own % 2 == 1) and 0 or 1, 2 end
  if own == 1 then return 0, 1 end
  return level, level
end
