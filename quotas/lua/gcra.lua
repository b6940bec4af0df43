-- Token bucket and leaky bucket, both as GCRA: the only state is the
-- "theoretical arrival time" (TAT) at which the bucket is empty again.
-- Emission interval T = window / limit; the bucket holds `cap` units.
--   token_bucket (4): admit when the bucket has room for `weight` units.
--   leaky_bucket (5): the same meter (policing); with max_delay > 0 it shapes:
--   a request that fits is held until its turn in the steady outflow
--   (TAT - now), and refused if that would exceed max_delay.
local function gcra(raw, s, now, shaping)
  local T = s.window / s.limit
  local tau = s.cap * T
  local tat = tonumber(raw) or 0
  if tat < now then tat = now end
  local new_tat = tat + s.weight * T
  local delay = 0
  if shaping then delay = tat - now end
  local over = new_tat - now - tau
  local late = delay - s.max_delay
  if over <= EPSILON and late <= EPSILON then
    return {ok = true, retry = 0, delay = math.max(0, delay), reset = new_tat - now,
            remaining = math.floor((tau - (new_tat - now)) / T + 1e-6),
            value = fmt(new_tat), ttl = new_tat - now}
  end
  local retry = NEVER
  if s.weight <= s.cap then retry = math.ceil(math.max(over, late, 1)) end
  return {ok = false, delay = 0, reset = tat - now, retry = retry,
          remaining = math.max(0, math.floor((tau - (tat - now)) / T + 1e-6))}
end

ALGORITHMS[4] = function(raw, s, now) return gcra(raw, s, now, false) end
ALGORITHMS[5] = function(raw, s, now) return gcra(raw, s, now, s.max_delay > 0) end
