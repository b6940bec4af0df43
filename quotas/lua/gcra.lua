-- Token bucket and leaky bucket, both as GCRA: the only state is the
-- "theoretical arrival time" (TAT) at which the bucket is empty again.
-- Emission interval T = window / limit; the bucket holds `cap` units.
--   token_bucket (4): admit when the bucket has room for `weight` units.
--   leaky_bucket (5): the same meter (policing); with max_delay > 0 it shapes:
--   a request that fits is held until its turn in the steady outflow
--   (TAT - now), and refused if that would exceed max_delay.
local function gcra(key, s, now, shaping)
  local T = s.window / s.limit
  local tau = s.cap * T
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local new_tat = tat + s.weight * T
  local delay = 0
  if shaping then delay = tat - now end
  local over = new_tat - now - tau
  local late = delay - s.max_delay
  local r = {}
  if over <= EPSILON and late <= EPSILON then
    r.ok, r.retry, r.delay = true, 0, math.max(0, delay)
    r.remaining = math.floor((tau - (new_tat - now)) / T + 1e-6)
    r.reset = new_tat - now
    r.commit = function()
      redis.call('SET', key, fmt(new_tat), 'PX', ttl_ms(new_tat - now))
    end
  else
    r.ok, r.delay = false, 0
    r.remaining = math.max(0, math.floor((tau - (tat - now)) / T + 1e-6))
    r.reset = tat - now
    if s.weight > s.cap then
      r.retry = NEVER
    else
      r.retry = math.ceil(math.max(over, late, 1))
    end
  end
  return r
end

ALGORITHMS[4] = function(key, s, now) return gcra(key, s, now, false) end
ALGORITHMS[5] = function(key, s, now) return gcra(key, s, now, s.max_delay > 0) end
