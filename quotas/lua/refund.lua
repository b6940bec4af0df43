-- Give back what one admitted decision consumed (used when a view ended in a
-- server error and the limit asks for refunds). Best effort by design: a
-- window that has moved on since the decision has nothing left to refund.
--
-- KEYS and ARGV as for decide.lua, but ARGV[1] is the decision's time.
local dnow = tonumber(ARGV[1])
local weight_override = tonumber(ARGV[2])
local next_key = 2
for i = 1, #ARGV - 2 do
  local code, limit, window, _, w, _, _, field = string.match(ARGV[2 + i], SPEC)
  code, limit, window = tonumber(code), tonumber(limit), tonumber(window)
  local weight = weight_override or tonumber(w)
  if code == 2 then
    local key = KEYS[next_key]
    next_key = next_key + 1
    local members = redis.call('ZRANGEBYSCORE', key, dnow, dnow, 'LIMIT', 0, weight)
    if #members > 0 then redis.call('ZREM', key, unpack(members)) end
  else
    local raw = redis.call('HGET', KEYS[1], field)
    local value = nil
    if raw and code == 1 then
      local idx, c = string.match(raw, '^(%d+):(%d+)$')
      if idx and tonumber(idx) == math.floor(dnow / window) then
        value = idx .. ':' .. fmt(math.max(0, tonumber(c) - weight))
      end
    elseif raw and code == 3 then
      local idx, p, c = string.match(raw, '^(%d+):(%d+):(%d+)$')
      if idx then
        local didx = math.floor(dnow / window)
        p, c = tonumber(p), tonumber(c)
        if tonumber(idx) == didx then c = math.max(0, c - weight) end
        if tonumber(idx) == didx + 1 then p = math.max(0, p - weight) end
        value = idx .. ':' .. fmt(p) .. ':' .. fmt(c)
      end
    elseif raw then
      -- A TAT in the past simply means a full bucket, so no clamping is needed.
      value = fmt(tonumber(raw) - weight * window / limit)
    end
    if value then redis.call('HSET', KEYS[1], field, value) end
  end
end
return 1
