-- Sliding window log: exact; at most `limit` units in any interval (now - window, now].
-- State: a sorted set of its own, one member per admitted unit, scored by
-- time. Denied requests are never logged, so a flood cannot grow it past
-- `limit` members.

local function log_entry_time(key, index)
  local e = redis.call('ZRANGE', key, index, index, 'WITHSCORES')
  return tonumber(e[2])
end

-- -> ok, remaining, reset, retry, delay, count (the units in the window now)
local function log_check(key, limit, window, weight, now)
  -- Dropping entries that left the window consumes nothing: it is housekeeping.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  if count + weight <= limit then
    local reset = 0
    if weight > 0 then
      reset = window
    elseif count > 0 then
      reset = log_entry_time(key, -1) + window - now
    end
    return true, limit - count - weight, reset, 0, 0, count
  end
  local reset = 0
  if count > 0 then reset = log_entry_time(key, -1) + window - now end
  if weight > limit then return false, limit - count, reset, NEVER, 0, count end
  -- The request fits once the (count + weight - limit) oldest units have left.
  local retry = log_entry_time(key, count + weight - limit - 1) + window - now
  return false, limit - count, reset, retry, 0, count
end

-- The units are recorded at `at`: now, or an allowance's end (later: used
-- during the allowance, they must not leave the window before its last use).
local function log_commit(key, window, weight, at, count, now)
  if weight <= 0 then return end
  local stamp, n = fmt(at), count
  for _ = 1, weight do
    -- Members must be unique; after a refund a suffix may be taken, so skip ahead.
    repeat n = n + 1 until redis.call('ZADD', key, 'NX', at, stamp .. '-' .. n) == 1
  end
  -- Never shortened: an allowance's units, recorded at its end, outlive a unit recorded now (else the log
  -- vanishes while they count, and a second admits more than the limit).
  lengthen_ttl(key, window + at - now)
end
