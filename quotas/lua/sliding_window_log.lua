-- Sliding window log: exact; at most `limit` units in any interval (now - window, now].
-- State: a sorted set of its own, one member per admitted unit, scored by
-- time. Denied requests are never logged, so a flood cannot grow it past
-- `limit` members.
local function log_entry_time(key, index)
  local e = redis.call('ZRANGE', key, index, index, 'WITHSCORES')
  return tonumber(e[2])
end

local function log_check(key, s, now)
  -- Dropping entries that left the window consumes nothing: it is housekeeping.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - s.window)
  local count = redis.call('ZCARD', key)
  local r = {delay = 0, count = count}
  if count + s.weight <= s.limit then
    r.ok, r.retry, r.remaining, r.reset = true, 0, s.limit - count - s.weight, 0
    if s.weight > 0 then
      r.reset = s.window
    elseif count > 0 then
      r.reset = log_entry_time(key, -1) + s.window - now
    end
  else
    r.ok, r.remaining, r.reset = false, s.limit - count, 0
    if count > 0 then r.reset = log_entry_time(key, -1) + s.window - now end
    if s.weight > s.limit then
      r.retry = NEVER
    else
      -- The request fits once the (count + weight - limit) oldest units have left.
      r.retry = log_entry_time(key, count + s.weight - s.limit - 1) + s.window - now
    end
  end
  return r
end

local function log_commit(key, s, now, count)
  if s.weight <= 0 then return end
  local stamp, n = fmt(now), count
  for _ = 1, s.weight do
    -- Members must be unique; after a refund a suffix may be taken, so skip ahead.
    repeat n = n + 1 until redis.call('ZADD', key, 'NX', now, stamp .. '-' .. n) == 1
  end
  redis.call('PEXPIRE', key, ttl_ms(s.window))
end
