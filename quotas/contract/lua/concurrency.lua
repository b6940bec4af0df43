-- Concurrency: at most `limit` requests of a client in flight. State: a
-- sorted set of its own, one member per in-flight request, scored by the
-- time its lease runs out. The middleware removes the member when the
-- response is done (release.lua); a worker that dies mid-request leaves its
-- member behind only until the lease (the spec's window) expires.

-- -> ok, remaining, reset, retry, delay
local function lease_check(key, limit, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local count = redis.call('ZCARD', key)
  if count + 1 <= limit then return true, limit - count - 1, 0, 0, 0 end
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  -- Any in-flight request may end at any moment; a second is a fair hint.
  return false, 0, tonumber(first[2]) - now, math.min(1000000, tonumber(first[2]) - now), 0
end

local function lease_commit(key, lease, now, request_id)
  redis.call('ZADD', key, now + lease, request_id)
  lengthen_ttl(key, lease)
end
