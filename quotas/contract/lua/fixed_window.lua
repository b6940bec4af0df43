-- Fixed window: at most `limit` units per window aligned to the epoch.
-- State: "<window index>:<count>"; a value from an older window counts as 0.
ALGORITHMS[FIXED_WINDOW] = function(raw, limit, weight, window, _, _, now)
  local idx = math.floor(now / window)
  local count = 0
  if raw then
    local i, c = string.match(raw, '^(%d+):(%d+)$')
    if i and tonumber(i) == idx then count = tonumber(c) end
  end
  local reset = (idx + 1) * window - now
  if count + weight <= limit then
    return true, limit - count - weight, reset, 0, 0, string.format('%d:%d', idx, count + weight), reset
  end
  if weight > limit then return false, limit - count, reset, NEVER, 0 end
  return false, limit - count, reset, reset, 0
end
