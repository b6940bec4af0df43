-- Helpers shared by the decision and refund scripts.
-- All times are integer microseconds; all counts are request units (weight).

local NEVER = -1       -- retry value for a request that can never fit its limit
local EPSILON = 1      -- microseconds of float slack when comparing schedules

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

-- Parse one window spec: "<code> <limit> <window us> <capacity> <weight>
-- <max delay us> <shadow 0|1> <field>", the field naming the window's state.
local function parse_spec(text, weight)
  local code, limit, window, cap, w, max_delay, shadow, field =
    string.match(text, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ([01]) (.+)$')
  return {
    code = tonumber(code), limit = tonumber(limit), window = tonumber(window),
    cap = tonumber(cap), weight = weight or tonumber(w), max_delay = tonumber(max_delay),
    shadow = shadow == '1', field = field,
  }
end

-- Counter-style algorithms keep their state as one field of the client's
-- hash: ALGORITHMS[code](raw field value or false, spec, now) -> result with
--   ok (boolean), remaining, reset (us until the full quota is back), retry
--   (us until this request would fit, 0 when ok, NEVER if it never can), delay
--   (us the request must be held), and when ok: value (the field's new value)
--   and ttl (us the value must live).
-- The sliding log keeps a sorted set of its own (sliding_window_log.lua).
local ALGORITHMS = {}
