-- Sliding window counter: the previous aligned window's count, weighted by
-- how much of it still overlaps (now - window, now], plus the current count.
-- An approximation (see docs/algorithms.md for its bound).
-- State: "<window index>:<previous count>:<current count>".
ALGORITHMS[SLIDING_WINDOW_COUNTER] = function(raw, limit, weight, W, _, _, now)
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
  if used_scaled + weight * W <= limit * W then
    local new_cur = cur + weight
    local reset = 0
    if new_cur > 0 then reset = 2 * W - elapsed elseif prev > 0 then reset = W - elapsed end
    return true, math.floor((limit * W - used_scaled - weight * W) / W), reset, 0, 0,
      string.format('%d:%d:%d', idx, prev, new_cur), 2 * W - elapsed
  end
  local remaining = math.max(0, math.floor((limit * W - used_scaled) / W))
  local reset = W - elapsed
  if cur > 0 then reset = 2 * W - elapsed end
  local retry
  if weight > limit then
    retry = NEVER
  elseif cur + weight <= limit then
    -- Enough of the previous window's weight slides out within this window.
    retry = math.max(1, math.ceil(W - elapsed - (limit - cur - weight) * W / prev))
  else
    -- Wait for the next window, where this window's count becomes the weighted one.
    local into_next = math.max(0, W * (1 - (limit - weight) / cur))
    retry = math.max(1, math.ceil(W - elapsed + into_next))
  end
  return false, remaining, reset, retry, 0
end
