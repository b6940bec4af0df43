-- Period quotas (PERIOD_QUOTA: weight units, PERIOD_REQUESTS: requests) and
-- money budgets (BUDGET: cost in micro-units) per
-- calendar period. The spec carries the current period [w.start, w.stop) and
-- the end of the next one (w.next_stop), computed by the application (see
-- quotas.engine.protocol.WindowSpec.for_period); the server clock picks
-- between them, so a reset never waits for an application host's clock.
-- State: "<period start us>:<used>:<alert level>"; alert level 1 = 80 %
-- reached, 2 = 100 % reached (each level is reported once per period).
-- Built on first use in a call (load_periods): every function a script
-- defines is created anew on each call, and most decisions have no period.
local function load_periods()
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

  -- Returns the usual values plus `used` (after this request) and the alert mask.
  local function period_algorithm(raw, limit, start, stop, weight, next_stop, now)
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
    local value = nil
    if level < 2 then value = string.format('%d:%d:%d', pstart, used, 2) end
    local mask = 0
    if level < 2 then mask = 2 end
    return false, math.max(0, limit - used), reset, retry, 0, value, reset, used, mask
  end
  return period_algorithm, period_of, parse_period_state, alert_level, crossed
end

local period_algorithm
-- Periods and budgets are never scaled: `cap` is unused.
ALGORITHMS[PERIOD_QUOTA] = function(w, raw, limit, cap, now)
  if not period_algorithm then period_algorithm = load_periods() end
  return period_algorithm(raw, limit, w.start, w.stop, w.weight, w.next_stop, now)
end
ALGORITHMS[BUDGET] = ALGORITHMS[PERIOD_QUOTA]
ALGORITHMS[PERIOD_REQUESTS] = ALGORITHMS[PERIOD_QUOTA]
