-- Sliding window counter: the previous aligned window's count, weighted by
-- how much of it still overlaps (now - window, now], plus the current count.
-- An approximation (see the README for its bound); state is one string
-- "<window index>:<previous count>:<current count>".
ALGORITHMS[3] = function(key, s, now)
  local W = s.window
  local idx = math.floor(now / W)
  local elapsed = now - idx * W
  local prev, cur = 0, 0
  local raw = redis.call('GET', key)
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
  local r = {delay = 0}
  if used_scaled + s.weight * W <= s.limit * W then
    local new_cur = cur + s.weight
    r.ok, r.retry = true, 0
    r.remaining = math.floor((s.limit * W - used_scaled - s.weight * W) / W)
    if new_cur > 0 then r.reset = 2 * W - elapsed elseif prev > 0 then r.reset = W - elapsed else r.reset = 0 end
    r.commit = function()
      redis.call('SET', key, fmt(idx) .. ':' .. fmt(prev) .. ':' .. fmt(new_cur),
        'PX', ttl_ms(2 * W - elapsed))
    end
  else
    r.ok = false
    r.remaining = math.max(0, math.floor((s.limit * W - used_scaled) / W))
    if cur > 0 then r.reset = 2 * W - elapsed else r.reset = W - elapsed end
    if s.weight > s.limit then
      r.retry = NEVER
    elseif cur + s.weight <= s.limit then
      -- Enough of the previous window's weight slides out within this window.
      r.retry = math.ceil(W - elapsed - (s.limit - cur - s.weight) * W / prev)
    else
      -- Wait for the next window, where today's count becomes the weighted one.
      local into_next = W * (1 - (s.limit - s.weight) / cur)
      if into_next < 0 then into_next = 0 end
      r.retry = math.ceil(W - elapsed + into_next)
    end
    if r.retry ~= NEVER and r.retry < 1 then r.retry = 1 end
  end
  return r
end
