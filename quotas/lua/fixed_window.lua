-- Fixed window: at most `limit` units per window aligned to the epoch.
-- State: "<window index>:<count>"; a value from an older window counts as 0.
ALGORITHMS[1] = function(raw, s, now)
  local idx = math.floor(now / s.window)
  local count = 0
  if raw then
    local i, c = string.match(raw, '^(%d+):(%d+)$')
    if i and tonumber(i) == idx then count = tonumber(c) end
  end
  local reset = (idx + 1) * s.window - now
  if count + s.weight <= s.limit then
    return {ok = true, remaining = s.limit - count - s.weight, reset = reset, retry = 0, delay = 0,
            value = fmt(idx) .. ':' .. fmt(count + s.weight), ttl = reset}
  end
  local retry = reset
  if s.weight > s.limit then retry = NEVER end
  return {ok = false, remaining = s.limit - count, reset = reset, retry = retry, delay = 0}
end
