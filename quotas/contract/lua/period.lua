-- Period quotas (PERIOD_QUOTA: weight units, PERIOD_REQUESTS: requests) and
-- money budgets (BUDGET: cost in micro-units) per calendar period. The spec
-- carries the period [start, stop) that holds the application host's clock
-- and the end of the next one (next_stop), computed by the application (see
-- quotas.contract.protocol.WindowSpec.for_period); the server's clock picks the
-- period: the previous one (ending at start) while a host ahead of the server
-- already sends the next period's bounds, the next one once the server has
-- passed stop. So neither a reset nor a period's spend ever follows one
-- host's clock.
-- State: "<period end us>:<used>:<alert level>:<reserved>:<limit>[:<others>]"
-- (a period is named by its end, which every host sends for the previous,
-- current or next period); alert level 1 = 80 % reached, 2 = 100 % reached
-- (each level is reported once per limit and period). A stored state is never
-- replaced by an earlier period's. `reserved` is the part of `used` that live
-- allowances hold and have not spent (their later requests, admitted
-- in-process): it counts against the limit but raises no alert level, which
-- follows committed spend (used - reserved) only; an allowance's end releases
-- it (adjust.lua).
-- Alert levels belong to a limit, not to the counter: the level is the one of
-- `limit` (the amount it was reached against), and `others` keeps the levels
-- of other amounts the same counter was limited by this period
-- ("<limit>=<level>,...": a customer's cap lowering a budget shares its
-- counter, so removing the cap leaves the budget's own alerts due). A state
-- of an earlier release ("<end>:<used>:<level>") has a level of no known
-- limit: it is taken as the reading limit's.

local function alert_level(used, limit)
  -- Nothing spent is no threshold, even of a budget of 0 (a free request under it reports nothing).
  if used <= 0 then return 0 end
  if used >= limit then return 2 elseif used * 5 >= limit * 4 then return 1 end
  return 0
end

local function crossed(old_level, new_level)
  -- Bit mask of newly reached thresholds: 1 = 80 %, 2 = 100 %.
  local mask = 0
  if old_level < 1 and new_level >= 1 then mask = mask + 1 end
  if old_level < 2 and new_level >= 2 then mask = mask + 2 end
  return mask
end

-- The end (us) of the period holding the server's `now`, which names it, and
-- the length of the host's period (the named one's, give or take the few days
-- calendar periods differ by).
local function period_of(start, stop, next_stop, now)
  local span = stop - start
  if now >= stop then return next_stop, span end
  if now < start then return start, span end
  return stop, span
end

-- The period a request at `now` counts in, and what it holds: the server's
-- period `pend`, or the later one a stored state names (a state is never
-- replaced by an earlier period's). A stored period ending in the second half
-- of this one (`span` long) is this period under another time zone
-- (BUDGET_TIME_ZONE moved west: the end moved later): its spend and alert
-- level carry over. An earlier one is the previous period: dropped.
-- -> the period's end (its name), used, the alert level of `limit`, reserved,
-- and every limit's level (a table, for period_state)
local function parse_period_state(raw, pend, span, limit)
  if raw then
    local s, u, l, r, lim, others = string.match(raw, '^(%d+):(%d+):(%d):?(%d*):?(%d*):?([%d=,]*)$')
    s = tonumber(s)
    if s and (s >= pend or (span and (pend - s) * 2 < span)) then
      if s < pend then s = pend end
      local levels = {}
      for k, v in string.gmatch(others, '(%d+)=(%d)') do levels[tonumber(k)] = tonumber(v) end
      l = tonumber(l)
      if lim == '' then
        if limit then levels[limit] = l end  -- an earlier release's state: its level taken as this limit's
      else
        levels[tonumber(lim)] = l
      end
      return s, tonumber(u), (limit and levels[limit]) or 0, tonumber(r) or 0, levels
    end
  end
  return pend, 0, 0, 0, {}
end

-- The stored state of a period: `level` is `limit`'s; the other limits' levels in `levels` are kept (those
-- reached, three at most, by amount: deterministic, as a script must be).
local function period_state(pend, used, level, reserved, limit, levels)
  local others, amounts = {}, {}
  for amount, reached in pairs(levels or {}) do
    if amount ~= limit and reached > 0 then amounts[#amounts + 1] = amount end
  end
  table.sort(amounts)
  for i = math.max(1, #amounts - 2), #amounts do others[#others + 1] = amounts[i] .. '=' .. levels[amounts[i]] end
  local state = string.format('%d:%d:%d:%d:%d', pend, used, level, reserved, limit)
  if #others > 0 then state = state .. ':' .. table.concat(others, ',') end
  return state
end

-- How long (us) past its end a period's state must live: a reader may still take it for its period under
-- another BUDGET_TIME_ZONE (moved west: parse_period_state carries a state ending up to half a period before
-- the new end), and a zone moves an end by 26 hours at most (UTC-12 to UTC+14). Without it the state died a
-- minute after the old zone's end (bucket.lua's headroom) and the period started afresh hours early.
local ZONE_SHIFT = 26 * 3600 * 1000000
local function carry_ttl(reset, span)
  local carry = span / 2
  if carry > ZONE_SHIFT then carry = ZONE_SHIFT end
  return reset + carry
end

-- Periods and budgets are never scaled; a refusal still returns a value
-- (the 100 % alert, stored once) for decide() to write. `reserve` is the part
-- of `weight` an allowance takes for its later requests: reserved, not spent
-- (the used reported, and the alert level, are committed spend's).
local function period_algorithm(raw, limit, weight, start, stop, next_stop, now, reserve)
  local server_end, span = period_of(start, stop, next_stop, now)
  local pend, used, level, reserved, levels = parse_period_state(raw, server_end, span, limit)
  local reset = pend - now
  if used + weight <= limit then
    local new_used, new_reserved = used + weight, reserved + (reserve or 0)
    local committed = new_used - new_reserved
    local new_level = math.max(level, alert_level(committed, limit))
    return true, limit - new_used, reset, 0, 0, period_state(pend, new_used, new_level, new_reserved, limit, levels),
      carry_ttl(reset, span), committed, crossed(level, new_level)
  end
  used = used - reserved  -- what a refusal reports, and judges its 100 % alert by: committed spend
  local retry = reset
  if weight > limit then retry = NEVER end
  -- A refusal with 80 % or more spent (or by a budget of 0) means the budget is spent for this period:
  -- report 100 % once. Below that the request was only too big for what is left: nothing is stored, so 80 %
  -- is still reported when it is reached.
  if level < 2 and (alert_level(used, limit) >= 1 or limit <= 0) then
    return false, math.max(0, limit - used - reserved), reset, retry, 0,
      period_state(pend, used + reserved, 2, reserved, limit, levels), carry_ttl(reset, span), used, 2
  end
  return false, math.max(0, limit - used - reserved), reset, retry, 0, nil, reset, used, 0
end

ALGORITHMS[PERIOD_QUOTA] = period_algorithm
ALGORITHMS[BUDGET] = period_algorithm
ALGORITHMS[PERIOD_REQUESTS] = period_algorithm
