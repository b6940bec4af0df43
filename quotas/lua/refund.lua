-- Give back what one admitted decision consumed (used when a view ended in a
-- server error and the limit asks for refunds). Best effort by design: a
-- window that has moved on since the decision has nothing left to refund.
--
-- KEYS[i]  the key of window i, as in decide.lua
-- ARGV[1]  the decision's time (us); ARGV[2] n, then 5 values per window:
--          algorithm code, limit, window (us), capacity, weight
local dnow = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
for i = 1, n do
  local b = 2 + (i - 1) * 5
  local code, limit, W = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  local weight = tonumber(ARGV[b + 5])
  local key = KEYS[i]
  if code == 1 then
    local raw = redis.call('GET', key)
    if raw then
      local idx, c = string.match(raw, '^(%d+):(%d+)$')
      if idx and tonumber(idx) == math.floor(dnow / W) then
        local left = math.max(0, tonumber(c) - weight)
        redis.call('SET', key, idx .. ':' .. fmt(left), 'KEEPTTL')
      end
    end
  elseif code == 2 then
    local members = redis.call('ZRANGEBYSCORE', key, dnow, dnow, 'LIMIT', 0, weight)
    if #members > 0 then redis.call('ZREM', key, unpack(members)) end
  elseif code == 3 then
    local raw = redis.call('GET', key)
    if raw then
      local idx, p, c = string.match(raw, '^(%d+):(%d+):(%d+)$')
      if idx then
        local didx = math.floor(dnow / W)
        p, c = tonumber(p), tonumber(c)
        if tonumber(idx) == didx then
          c = math.max(0, c - weight)
        elseif tonumber(idx) == didx + 1 then
          p = math.max(0, p - weight)
        end
        redis.call('SET', key, idx .. ':' .. fmt(p) .. ':' .. fmt(c), 'KEEPTTL')
      end
    end
  else
    local tat = tonumber(redis.call('GET', key) or '0')
    if tat > 0 then
      local T = W / limit
      -- A TAT in the past simply means a full bucket, so no clamping is needed.
      redis.call('SET', key, fmt(tat - weight * T), 'KEEPTTL')
    end
  end
end
return n
