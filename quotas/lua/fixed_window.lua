-- Fixed window: at most `limit` units per window aligned to the epoch.
-- State: one string "<window index>:<count>", expiring with its window.
ALGORITHMS[1] = function(key, s, now)
  local idx = math.floor(now / s.window)
  local count = 0
  local raw = redis.call('GET', key)
  if raw then
    local i, c = string.match(raw, '^(%d+):(%d+)$')
    if i and tonumber(i) == idx then count = tonumber(c) end
  end
  local reset = (idx + 1) * s.window - now
  local r = {reset = reset, delay = 0}
  if count + s.weight <= s.limit then
    r.ok, r.retry, r.remaining = true, 0, s.limit - count - s.weight
    r.commit = function()
      redis.call('SET', key, fmt(idx) .. ':' .. fmt(count + s.weight), 'PX', ttl_ms(reset))
    end
  else
    r.ok, r.remaining = false, s.limit - count
    if s.weight > s.limit then r.retry = NEVER else r.retry = reset end
  end
  return r
end
