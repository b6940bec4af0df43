-- Helpers shared by the decision and refund scripts.
-- All times are integer microseconds; all counts are request units (weight).
-- Written for speed: no tables or closures per window on the hot path, the
-- algorithms return several values instead.

local NEVER = -1       -- retry value for a request that can never fit its limit
local EPSILON = 1      -- microseconds of float slack when comparing schedules
local SPEC = '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ([01]) (.+)$'

local function fmt(n)
  -- tostring() would print large integers in exponent form and lose digits.
  return string.format('%.17g', n)
end

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function ttl_ms(us)
  -- A PX argument that outlives `us` microseconds, at least one millisecond.
  local ms = math.ceil(us / 1000) + 1
  if ms < 1 then ms = 1 end
  return ms
end

-- Counter-style algorithms keep their state as one field of the client's hash:
--   ALGORITHMS[code](raw field value or false, limit, window, cap, weight, max_delay, now)
--   -> ok, remaining, reset, retry, delay, value, ttl
-- reset: us until the full quota is back; retry: us until this request would
-- fit (0 when ok, NEVER if it never can); delay: us the request must be held;
-- value and ttl (only when ok): the field's new value and how long it must live.
-- The sliding log keeps a sorted set of its own (sliding_window_log.lua).
local ALGORITHMS = {}
