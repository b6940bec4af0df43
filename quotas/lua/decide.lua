-- One decision for one request: every limit window is checked, and only if
-- none denies (shadow windows never deny) are they all consumed. Lua scripts
-- run atomically, so this is all-or-nothing under any concurrency.
--
-- KEYS[i]  the key of window i; all keys share the client's {hash tag}
-- ARGV[1]  now in microseconds, or '' to use the Redis server's clock
-- ARGV[2]  n, the number of windows, followed by 7 values per window:
--          algorithm code, limit, window (us), capacity, weight,
--          max delay (us), shadow flag ('1' or '0')
-- Returns  {allowed, now, then per window: ok, remaining, reset, retry, delay}
local now
if ARGV[1] == '' then now = server_now() else now = tonumber(ARGV[1]) end
local n = tonumber(ARGV[2])
local results, specs = {}, {}
local allowed = true
for i = 1, n do
  local b = 2 + (i - 1) * 7
  local s = {
    limit = tonumber(ARGV[b + 2]), window = tonumber(ARGV[b + 3]),
    cap = tonumber(ARGV[b + 4]), weight = tonumber(ARGV[b + 5]),
    max_delay = tonumber(ARGV[b + 6]), shadow = ARGV[b + 7] == '1',
  }
  local r = ALGORITHMS[tonumber(ARGV[b + 1])](KEYS[i], s, now)
  results[i], specs[i] = r, s
  if not r.ok and not s.shadow then allowed = false end
end

local reply = {allowed and 1 or 0, now}
for i = 1, n do
  local r = results[i]
  -- A shadow window that would deny is reported, not consumed.
  if allowed and r.ok then r.commit() end
  reply[#reply + 1] = r.ok and 1 or 0
  reply[#reply + 1] = math.floor(r.remaining)
  reply[#reply + 1] = math.ceil(math.max(r.reset, 0))
  reply[#reply + 1] = math.ceil(r.retry)
  reply[#reply + 1] = math.ceil(r.delay)
end
return reply
