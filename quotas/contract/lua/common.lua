-- Helpers shared by the library's functions (decide, refund, adjust, ...).
-- All times are integer microseconds; all counts are request units (weight).
--
-- A window's spec is packed by quotas.contract.protocol.WindowSpec (which also
-- generates SPEC_FORMAT): code, limit, three numbers whose meaning depends on
-- the algorithm, weight, shadow (0 or 1) and field, unpacked in that order:
--   rolling windows and leases: window (us; a lease's length), cap, max_delay (us)
--   calendar periods (IS_PERIOD[code]): start and stop (us) of the current
--   period [start, stop), and next_stop, the end of the one after
-- decide() unpacks specs straight into named locals (see decide.lua for why);
-- the scripts off the request path take a table from parse_spec.

local EPSILON = 1      -- microseconds of float slack when comparing schedules

local function parse_spec(spec)
  local code, limit, window_or_start, cap_or_stop, weight, delay_or_next_stop, shadow, field =
    struct.unpack(SPEC_FORMAT, spec)
  local w = {code = code, limit = limit, weight = weight, shadow = shadow == 1, field = field}
  if IS_PERIOD[code] then
    w.start, w.stop, w.next_stop = window_or_start, cap_or_stop, delay_or_next_stop
  else
    w.window, w.cap, w.max_delay = window_or_start, cap_or_stop, delay_or_next_stop
  end
  return w
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
  return t[1] * 1000000 + t[2]  -- Lua's arithmetic converts the strings: half of what tonumber() costs
end

local function ttl_ms(us)
  -- A PX argument that outlives `us` microseconds, at least one millisecond.
  local ms = math.ceil(us / 1000) + 1
  if ms < 1 then ms = 1 end
  return ms
end

local function lengthen_ttl(key, us)
  -- The key's TTL made to outlive `us` microseconds, never shortened: a member recorded earlier (a lease, an
  -- allowance's units recorded at its end) may need the key longer.
  local ms = ttl_ms(us)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end

-- Counter-style algorithms keep their state as one field of the client's hash:
--   ALGORITHMS[code](raw, limit, weight, a, b, c, now)
--   -> ok, remaining, reset, retry, delay, value, ttl[, used, alert]
-- raw is the field's value or false; limit the one in force (the spec's, or
-- scaled by the adaptive multiplier); weight what this request takes from
-- the window; a, b, c the spec's three numbers, named by each algorithm
-- (window, cap, max_delay; or start, stop, next_stop), b (the cap) scaled
-- like the limit. reset: us until the full quota is back; retry: us until
-- this request would fit (0 when ok, NEVER if it never can); delay: us the
-- request must be held; value and ttl: the field's new value and how long it
-- must live (nil when nothing is to be written); used and alert: periods only.
-- Sliding logs and leases keep sorted sets of their own (sliding_window_log.lua,
-- concurrency.lua).
local ALGORITHMS = {}
