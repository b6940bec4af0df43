-- Period quotas (PERIOD_QUOTA: weight units, PERIOD_REQUESTS: requests) and
-- money budgets (BUDGET: cost in micro-units) per calendar period. The spec
-- carries the current period [start, stop) and the end of the next one
-- (next_stop), computed by the application (see
-- quotas.store.protocol.WindowSpec.for_period); the server clock picks
-- between them, so a reset never waits for an application host's clock.
-- State: "<period start us>:<used>:<alert level>"; alert level 1 = 80 %
-- reached, 2 = 100 % reached (each level is reported once per period).

local function alert_level(used, limit)
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

local function period_of(start, stop, next_stop, now)
  if now >= stop then return stop, next_stop end
  return start, stop
end

local function parse_period_state(raw, pstart)
  if raw then
    local s, u, l = string.match(raw, '^(%d+):(%d+):(%d)$')
    if s and tonumber(s) == pstart then return tonumber(u), tonumber(l) end
  end
  return 0, 0
end

-- Periods and budgets are never scaled; a refusal still returns a value
-- (the 100 % alert, stored once) for decide() to write.
local function period_algorithm(raw, limit, weight, start, stop, next_stop, now)
  local pstart, pstop = period_of(start, stop, next_stop, now)
  local used, level = parse_period_state(raw, pstart)
  local reset = pstop - now
  if used + weight <= limit then
    local new_used = used + weight
    local new_level = math.max(level, alert_level(new_used, limit))
    return true, limit - new_used, reset, 0, 0,
      string.format('%d:%d:%d', pstart, new_used, new_level), reset, new_used, crossed(level, new_level)
  end
  local retry = reset
  if weight > limit then retry = NEVER end
  -- A refusal means the budget is spent for this period: report 100 % once.
  if level < 2 then
    return false, math.max(0, limit - used), reset, retry, 0, string.format('%d:%d:%d', pstart, used, 2), reset,
      used, 2
  end
  return false, math.max(0, limit - used), reset, retry, 0, nil, reset, used, 0
end

ALGORITHMS[PERIOD_QUOTA] = period_algorithm
ALGORITHMS[BUDGET] = period_algorithm
ALGORITHMS[PERIOD_REQUESTS] = period_algorithm
