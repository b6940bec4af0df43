-- Sliding window counter: the previous aligned window's count, weighted by
-- how much of it still overlaps (now - window, now], plus the current count.
-- An approximation (see the README for its bound).
-- State: "<window index>:<previous count>:<current count>".
ALGORITHMS[3] = function(raw, s, now)
  local W = s.window
  local idx = math.floor(now / W)
  local elapsed = now - idx * W
  local prev, cur = 0, 0
  if raw then
    local i, p, c = string.match(raw, '^(%d+):(%d+):(%d+)$')
    if i then
      i = tonumber(i)
      if i == idx then
        prev, cur = tonumber(p), tonumber(c)
      elseif i == idx - 1 then
        prev = tonumber(c)
      end
    end
  end
  -- Compared multiplied through by W so that integers stay exact.
  local used_scaled = prev * (W - elapsed) + cur * W
  if used_scaled + s.weight * W <= s.limit * W then
    local new_cur = cur + s.weight
    local reset = 0
    if new_cur > 0 then reset = 2 * W - elapsed elseif prev > 0 then reset = W - elapsed end
    return {ok = true, retry = 0, delay = 0, reset = reset,
            remaining = math.floor((s.limit * W - used_scaled - s.weight * W) / W),
            value = fmt(idx) .. ':' .. fmt(prev) .. ':' .. fmt(new_cur), ttl = 2 * W - elapsed}
  end
  local r = {ok = false, delay = 0, reset = W - elapsed,
             remaining = math.max(0, math.floor((s.limit * W - used_scaled) / W))}
  if cur > 0 then r.reset = 2 * W - elapsed end
  if s.weight > s.limit then
    r.retry = NEVER
  elseif cur + s.weight <= s.limit then
    -- Enough of the previous window's weight slides out within this window.
    r.retry = math.max(1, math.ceil(W - elapsed - (s.limit - cur - s.weight) * W / prev))
  else
    -- Wait for the next window, where this window's count becomes the weighted one.
    local into_next = math.max(0, W * (1 - (s.limit - s.weight) / cur))
    r.retry = math.max(1, math.ceil(W - elapsed + into_next))
  end
  return r
end
