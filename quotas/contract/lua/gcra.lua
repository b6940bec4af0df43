-- Token bucket and leaky bucket, both as GCRA: the only state is the
-- "theoretical arrival time" (TAT) at which the bucket is empty again.
-- Emission interval T = window / limit; the bucket holds `cap` units.
--   token_bucket: admit when the bucket has room for `weight` units.
--   leaky_bucket: the same meter (policing); with max_delay > 0 it shapes:
--   a request that fits is held until its turn in the steady outflow
--   (TAT - now), and refused if that would exceed max_delay.
local function gcra(raw, limit, weight, window, cap, max_delay, now, shaping)
  local T = window / limit
  local tau = cap * T
  local tat = unpack_tat(raw)
  if tat < now then tat = now end
  local new_tat = tat + weight * T
  local delay = 0
  if shaping then delay = tat - now end
  local over = new_tat - now - tau
  local late = delay - max_delay
  if over <= EPSILON and late <= EPSILON then
    return true, math.floor((tau - (new_tat - now)) / T + 1e-6), new_tat - now, 0,
      math.max(0, delay), pack_tat(new_tat), new_tat - now
  end
  local retry = NEVER
  if weight <= cap then retry = math.ceil(math.max(over, late, 1)) end
  return false, math.max(0, math.floor((tau - (tat - now)) / T + 1e-6)), tat - now, retry, 0
end

ALGORITHMS[TOKEN_BUCKET] = function(raw, limit, weight, window, cap, max_delay, now)
  return gcra(raw, limit, weight, window, cap, max_delay, now, false)
end
ALGORITHMS[LEAKY_BUCKET] = function(raw, limit, weight, window, cap, max_delay, now)
  return gcra(raw, limit, weight, window, cap, max_delay, now, max_delay > 0)
end
