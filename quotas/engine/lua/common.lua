-- Helpers shared by the decision and refund scripts.
-- All times are integer microseconds; all counts are request units (weight).
-- Each window is one table (parse_spec); the algorithms return several values
-- rather than a table of results.

local EPSILON = 1      -- microseconds of float slack when comparing schedules
-- A window's spec, packed by quotas.engine.protocol.WindowSpec (which also generates
-- SPEC_FORMAT), as a table: code, limit, weight, shadow (a boolean), field,
-- and three numbers whose meaning depends on the algorithm:
--   rolling windows and leases: window (us; a lease's length), cap, max_delay (us)
--   calendar periods (IS_PERIOD[code]): start and stop (us) of the current
--   period [start, stop), and next_stop, the end of the one after
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
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function ttl_ms(us)
  -- A PX argument that outlives `us` microseconds, at least one millisecond.
  local ms = math.ceil(us / 1000) + 1
  if ms < 1 then ms = 1 end
  return ms
end

-- Counter-style algorithms keep their state as one field of the client's hash:
--   ALGORITHMS[code](w, raw field value or false, limit, cap, now)
--   -> ok, remaining, reset, retry, delay, value, ttl
-- w is the window (parse_spec), w.weight what the request takes from it;
-- limit and cap are the ones in force (w's, or scaled by the adaptive multiplier).
-- reset: us until the full quota is back; retry: us until this request would
-- fit (0 when ok, NEVER if it never can); delay: us the request must be held;
-- value and ttl (only when ok): the field's new value and how long it must live.
-- The sliding log keeps a sorted set of its own (sliding_window_log.lua).
local ALGORITHMS = {}
