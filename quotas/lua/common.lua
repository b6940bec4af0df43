-- Helpers shared by the decision and refund scripts.
-- All times are integer microseconds; all counts are request units (weight).
-- Written for speed: no tables or closures per window on the hot path, the
-- algorithms return several values instead.

local NEVER = -1       -- retry value for a request that can never fit its limit
local EPSILON = 1      -- microseconds of float slack when comparing schedules
-- A window's spec, packed by quotas.protocol.WindowSpec (which also generates
-- SPEC_FORMAT): algorithm code, limit, window (us), capacity, weight, max
-- delay (us), shadow (0/1), then the field name prefixed by its length.

local function parse_spec(spec)
  local code, limit, window, cap, weight, max_delay, shadow, field = struct.unpack(SPEC_FORMAT, spec)
  return code, limit, window, cap, weight, max_delay, shadow == 1, field
end

local function fmt(n)
  -- tostring() would print large integers in exponent form and lose digits.
  return string.format('%.17g', n)
end

-- GCRA state: the theoretical arrival time, a fractional number of
-- microseconds, stored as an 8-byte double (exact, and smaller and faster
-- than its 17-digit text). A value of another length reads as no state.
local function pack_tat(tat)
  return struct.pack('<d', tat)
end

local function unpack_tat(raw)
  if raw and #raw == 8 then return (struct.unpack('<d', raw)) end
  return 0
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
