-- One decision for one request: every limit window is checked, and only if
-- none denies (shadow windows never deny) are they all consumed. Lua scripts
-- run atomically, so this is all-or-nothing under any concurrency. The same
-- call counts the request in the client's usage hash of the day, and keeps
-- the client's ban state (escalation).
--
-- KEYS[1]  the client's hash: one field per counter-style window, and bans
-- KEYS[2]  the base of the client's usage keys (":<YYYYMMDD>" is appended)
-- KEYS[3+] the client's own-key windows (sliding logs, concurrency sets), in
--          the order of their specs (all keys carry the client's {hash tag})
-- ARGV[1]  now in microseconds, or '' to use the Redis server's clock
-- ARGV[2]  the request's weight for every rate window, or '' for each window's own
-- ARGV[3]  the request's estimated cost in micro-units (budget windows spend it)
-- ARGV[4]  the usage field prefix "<plan>|<scope>", or '' not to count
-- ARGV[5]  mode: '' decide; 'peek' read only; 'acl-allow' / 'acl-deny' only
--          count a request an allow / deny list decided
-- ARGV[6]  the adaptive multiplier of the client's plan ('' = 1): it scales
--          the rolling rate windows (codes 1-5), never periods or budgets
-- ARGV[7]  the plan's ban policy "<refusals> <window us> <duration us,...>", or ''
-- ARGV[8]  the request's id (for concurrency leases), or ''
-- ARGV[8+i] window i: "<algorithm code> <limit> <window us> <capacity>
--          <weight> <max delay us> <shadow 0|1> <field>" (see period.lua for
--          how periods reuse the numbers)
-- Returns  {allowed, now, flags, ban wait, then per window: ok, remaining,
--          reset, retry, delay, used (periods), alert mask (periods)};
--          flags: 1 = refused only because of the multiplier, 2 = refused
--          because the client is banned, 4 = this refusal started a ban;
--          ban wait: us until the ban ends.
local now
if ARGV[1] == '' then now = server_now() else now = tonumber(ARGV[1]) end
local weight = tonumber(ARGV[2])
local cost = tonumber(ARGV[3]) or 0
local mode = ARGV[5]
local multiplier = tonumber(ARGV[6]) or 1
local ban_policy = ARGV[7]
local n = #ARGV - 8

if mode == 'acl-allow' or mode == 'acl-deny' then
  if ARGV[4] ~= '' then
    if mode == 'acl-allow' then
      count_usage(KEYS[2], ARGV[4], now, {a = 1, w = weight or 1, c = cost})
    else
      count_usage(KEYS[2], ARGV[4], now, {da = 1})
    end
  end
  return {mode == 'acl-allow' and 1 or 0, now, 0, 0}
end

-- Parse every spec once into parallel arrays.
local codes, limits, windows, caps, weights, delays, shadows, fields = {}, {}, {}, {}, {}, {}, {}, {}
local full_limits, full_caps = {}, {}
local hash_fields = {}
local unit_weight = weight or 1
for i = 1, n do
  local code, limit, window, cap, w, max_delay, shadow, field = string.match(ARGV[8 + i], SPEC)
  code = tonumber(code)
  codes[i], limits[i], windows[i], caps[i] = code, tonumber(limit), tonumber(window), tonumber(cap)
  full_limits[i], full_caps[i] = limits[i], caps[i]
  if multiplier ~= 1 and code <= 5 then
    limits[i] = math.max(1, math.floor(limits[i] * multiplier))
    caps[i] = math.max(1, math.floor(caps[i] * multiplier))
  end
  delays[i], shadows[i], fields[i] = tonumber(max_delay), shadow == '1', field
  if code == 7 then
    weights[i] = cost
  elseif code == 8 or code == 9 then
    weights[i] = 1  -- requests, whatever their weight
  else
    weights[i] = weight or tonumber(w)
    if not weight and weights[i] > unit_weight then unit_weight = weights[i] end
  end
  if code ~= 2 and code ~= 9 then hash_fields[#hash_fields + 1] = field end
end
local counters = #hash_fields
if ban_policy ~= '' then
  hash_fields[#hash_fields + 1] = '!dn'
  hash_fields[#hash_fields + 1] = '!bn'
end
-- One read for every counter-style window of the request, and its ban state.
local values = {}
if #hash_fields > 0 then values = redis.call('HMGET', KEYS[1], unpack(hash_fields)) end
local raw_dn, raw_bn = values[counters + 1], values[counters + 2]

local reply = {0, now, 0, 0}
if ban_policy ~= '' then
  local until_ = parse_ban(raw_bn, now)
  if until_ > now then
    -- Banned: refused without looking at the limits.
    reply[3], reply[4] = 2, until_ - now
    if mode ~= 'peek' and ARGV[4] ~= '' then count_usage(KEYS[2], ARGV[4], now, {dx = 1}) end
    return reply
  end
end

local oks, new_values, ttls, own_keys, log_counts = {}, {}, {}, {}, {}
local allowed, budget_denied, would_deny = true, false, false
local next_value, next_key = 1, 3
for i = 1, n do
  local ok, remaining, reset, retry, delay, value, ttl, used, alert
  if codes[i] == 2 or codes[i] == 9 then
    own_keys[i] = KEYS[next_key]
    next_key = next_key + 1
    if codes[i] == 2 then
      ok, remaining, reset, retry, delay, log_counts[i] = log_check(own_keys[i], limits[i], windows[i], weights[i], now)
    else
      ok, remaining, reset, retry, delay = lease_check(own_keys[i], limits[i], now)
    end
  else
    ok, remaining, reset, retry, delay, value, ttl, used, alert = ALGORITHMS[codes[i]](
      values[next_value], limits[i], windows[i], caps[i], weights[i], delays[i], now)
    next_value = next_value + 1
    new_values[i], ttls[i] = value, ttl
  end
  oks[i] = ok
  if not ok then
    if shadows[i] then
      would_deny = true
    else
      allowed = false
      if codes[i] == 7 then budget_denied = true end
    end
  end
  local base = 4 + (i - 1) * 7
  reply[base + 1] = ok and 1 or 0
  reply[base + 2] = math.floor(remaining)
  reply[base + 3] = math.ceil(math.max(reset, 0))
  reply[base + 4] = math.ceil(retry)
  reply[base + 5] = math.ceil(delay)
  reply[base + 6] = used or 0
  reply[base + 7] = alert or 0
end
if allowed then reply[1] = 1 end

if not allowed and multiplier < 1 then
  -- Would the request pass at full capacity? Then only the reduction refused it.
  local would_pass, next_v, next_k = true, 1, 3
  for i = 1, n do
    local ok
    if codes[i] == 2 then
      ok = log_check(KEYS[next_k], full_limits[i], windows[i], weights[i], now)
      next_k = next_k + 1
    elseif codes[i] == 9 then
      ok = lease_check(KEYS[next_k], full_limits[i], now)
      next_k = next_k + 1
    else
      ok = ALGORITHMS[codes[i]](values[next_v], full_limits[i], windows[i], full_caps[i], weights[i], delays[i], now)
      next_v = next_v + 1
    end
    if not ok and not shadows[i] then would_pass = false end
  end
  if would_pass then reply[3] = 1 end
end
if mode == 'peek' then return reply end

local writes, ttl = {}, 0
for i = 1, n do
  -- Consume when all allow; a refused budget still records its 100 % alert.
  local write = (allowed and oks[i]) or (not oks[i] and codes[i] == 7 and new_values[i])
  if write then
    if codes[i] == 2 then
      log_commit(own_keys[i], windows[i], weights[i], now, log_counts[i])
    elseif codes[i] == 9 then
      lease_commit(own_keys[i], windows[i], now, ARGV[8])
    else
      writes[#writes + 1] = fields[i]
      writes[#writes + 1] = new_values[i]
      if ttls[i] > ttl then ttl = ttls[i] end
    end
  end
end
if not allowed and ban_policy ~= '' and reply[3] == 0 then
  -- Refusals for abuse count toward a ban; refusals caused by load shedding do not.
  local dn, bn, until_ = note_refusal(ban_policy, raw_dn, raw_bn, now)
  writes[#writes + 1] = '!dn'
  writes[#writes + 1] = dn
  local _, window = parse_ban_policy(ban_policy)
  if window > ttl then ttl = window end
  if bn then
    writes[#writes + 1] = '!bn'
    writes[#writes + 1] = bn
    reply[3], reply[4] = 4, until_ - now
    if until_ - now + STRIKE_MEMORY > ttl then ttl = until_ - now + STRIKE_MEMORY end
  end
end
if #writes > 0 then
  redis.call('HSET', KEYS[1], unpack(writes))
  -- The hash must outlive its longest-lived field; never shorten it. A
  -- quarter of headroom lets most decisions skip the PEXPIRE.
  local need = ttl_ms(ttl)
  if redis.call('PTTL', KEYS[1]) < need then redis.call('PEXPIRE', KEYS[1], need + math.floor(need / 4)) end
end

if ARGV[4] ~= '' then
  local counts = {}
  if allowed then
    counts.a, counts.w, counts.c = 1, unit_weight, cost
  elseif budget_denied then
    counts.db = 1
  elseif reply[3] == 1 then
    counts.dc = 1
  else
    counts.dr = 1
  end
  if would_deny then counts.sw = 1 end
  count_usage(KEYS[2], ARGV[4], now, counts)
end
return reply
