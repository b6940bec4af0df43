-- One decision for one request: every limit window is checked, and only if
-- none denies (shadow windows never deny) are they all consumed. Lua scripts
-- run atomically, so this is all-or-nothing under any concurrency.
--
-- KEYS[1]  the client's hash: one field per counter-style window
-- KEYS[2+] the client's sliding-log sorted sets, in the order of their specs
--          (every key carries the client's {hash tag}: one cluster slot)
-- ARGV[1]  now in microseconds, or '' to use the Redis server's clock
-- ARGV[2]  the request's weight for every window, or '' for each window's own
-- ARGV[2+i] window i's spec (see parse_spec), precomputed once per window
-- Returns  {allowed, now, then per window: ok, remaining, reset, retry, delay}
local now
if ARGV[1] == '' then now = server_now() else now = tonumber(ARGV[1]) end
local weight = tonumber(ARGV[2])
local n = #ARGV - 2
local specs, fields = {}, {}
for i = 1, n do
  local s = parse_spec(ARGV[2 + i], weight)
  specs[i] = s
  if s.code ~= 2 then fields[#fields + 1] = s.field end
end
-- One read for every counter-style window of the request.
local values = {}
if #fields > 0 then values = redis.call('HMGET', KEYS[1], unpack(fields)) end

local results, log_keys = {}, {}
local allowed = true
local next_value, next_key = 1, 2
for i = 1, n do
  local s, r = specs[i], nil
  if s.code == 2 then
    log_keys[i] = KEYS[next_key]
    next_key = next_key + 1
    r = log_check(log_keys[i], s, now)
  else
    r = ALGORITHMS[s.code](values[next_value], s, now)
    next_value = next_value + 1
  end
  results[i] = r
  if not r.ok and not s.shadow then allowed = false end
end

local reply = {allowed and 1 or 0, now}
local writes, ttl = {}, 0
for i = 1, n do
  local r, s = results[i], specs[i]
  -- A shadow window that would deny is reported, not consumed.
  if allowed and r.ok then
    if s.code == 2 then
      log_commit(log_keys[i], s, now, r.count)
    else
      writes[#writes + 1] = s.field
      writes[#writes + 1] = r.value
      if r.ttl > ttl then ttl = r.ttl end
    end
  end
  reply[#reply + 1] = r.ok and 1 or 0
  reply[#reply + 1] = math.floor(r.remaining)
  reply[#reply + 1] = math.ceil(math.max(r.reset, 0))
  reply[#reply + 1] = math.ceil(r.retry)
  reply[#reply + 1] = math.ceil(r.delay)
end
if #writes > 0 then
  redis.call('HSET', KEYS[1], unpack(writes))
  -- The hash lives as long as its longest-lived field needs; never shorten it.
  local ms = ttl_ms(ttl)
  if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
end
return reply
