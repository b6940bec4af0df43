-- One decision for one request: every limit window is checked, and only if
-- none denies (shadow windows never deny) are they all consumed. Lua scripts
-- run atomically, so this is all-or-nothing under any concurrency. The same
-- call counts the request in the client's usage hash of the day, and keeps
-- the client's ban state (escalation).
--
-- It is on every request's path, so it is written to do few Redis calls: one
-- TIME, one HMGET, one HSET and one HINCRBY for a request whose windows are
-- all counter-style (more for sliding logs, leases, or a new day or client).
--
-- KEYS[1]  the client's bucket hash (fields "<client>|<window>", see bucket.lua)
-- KEYS[2]  the base of the client's usage keys (":<YYYYMMDD>" is appended)
-- KEYS[3+] the client's own-key windows (sliding logs, concurrency sets), in
--          the order of their specs (all keys carry the bucket's {hash tag})
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
-- ARGV[9]  the client's field prefix "<client>|"
-- ARGV[10] the application's idea of today: "<days since 1970> <YYYYMMDD>", or ''
-- ARGV[10+i] window i's spec (see parse_spec in common.lua, and period.lua for
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
local usage = ARGV[4]
local mode = ARGV[5]
local multiplier = tonumber(ARGV[6]) or 1
local ban_policy = ARGV[7]
local cp = ARGV[9]
local n = #ARGV - 10

local usage_at, usage_days
if usage ~= '' then
  local hint_days, hint_text = string.match(ARGV[10], '^(%d+) (%d+)$')
  usage_at, usage_days = usage_key(KEYS[2], now, tonumber(hint_days), hint_text)
end

if mode == 'acl-allow' then
  if usage_at then count_usage(usage_at, usage_days, usage, 'a', 1, 'w', weight or 1, 'c', cost) end
  return {1, now, 0, 0}
elseif mode == 'acl-deny' then
  if usage_at then count_usage(usage_at, usage_days, usage, 'da', 1) end
  return {0, now, 0, 0}
end

-- Parse every spec once into parallel arrays; collect the fields to read.
local codes, limits, windows, caps, weights, delays, shadows, fields = {}, {}, {}, {}, {}, {}, {}, {}
local hash_fields = {}
local unit_weight = weight or 1
for i = 1, n do
  local code, limit, window, cap, w, max_delay, shadow, field = parse_spec(ARGV[10 + i])
  codes[i], limits[i], windows[i], caps[i], delays[i], shadows[i] = code, limit, window, cap, max_delay, shadow
  if code == 7 then
    weights[i] = cost
  elseif code == 8 or code == 9 then
    weights[i] = 1  -- requests, whatever their weight
  else
    weights[i] = weight or w
    if not weight and weights[i] > unit_weight then unit_weight = weights[i] end
  end
  if code ~= 2 and code ~= 9 then
    fields[i] = cp .. field
    hash_fields[#hash_fields + 1] = fields[i]
  end
end
local full_limits, full_caps = limits, caps
if multiplier ~= 1 then
  full_limits, full_caps, limits, caps = limits, caps, {}, {}
  for i = 1, n do
    if codes[i] <= 5 then
      limits[i] = math.max(1, math.floor(full_limits[i] * multiplier))
      caps[i] = math.max(1, math.floor(full_caps[i] * multiplier))
    else
      limits[i], caps[i] = full_limits[i], full_caps[i]
    end
  end
end
-- One read for every counter-style window, the client's and bucket's expiry, and the ban state.
local counters = #hash_fields
hash_fields[counters + 1] = cp .. '~'
hash_fields[counters + 2] = '~'
if ban_policy ~= '' then
  hash_fields[counters + 3] = cp .. '!dn'
  hash_fields[counters + 4] = cp .. '!bn'
end
local values = redis.call('HMGET', KEYS[1], unpack(hash_fields))
local client_exp, bucket_exp = values[counters + 1], values[counters + 2]
local raw_dn, raw_bn = values[counters + 3], values[counters + 4]

local reply = {0, now, 0, 0}
if ban_policy ~= '' then
  local until_ = parse_ban(raw_bn, now)
  if until_ > now then
    -- Banned: refused without looking at the limits.
    reply[3], reply[4] = 2, until_ - now
    if mode ~= 'peek' and usage_at then count_usage(usage_at, usage_days, usage, 'dx', 1) end
    return reply
  end
end

local oks, new_values, ttls, own_keys, log_counts = {}, {}, {}, {}, {}
local allowed, budget_denied, would_deny = true, false, false
local next_value, next_key = 1, 3
for i = 1, n do
  local code = codes[i]
  local ok, remaining, reset, retry, delay, value, ttl, used, alert
  if code == 2 or code == 9 then
    own_keys[i] = KEYS[next_key]
    next_key = next_key + 1
    if code == 2 then
      ok, remaining, reset, retry, delay, log_counts[i] = log_check(own_keys[i], limits[i], windows[i], weights[i], now)
    else
      ok, remaining, reset, retry, delay = lease_check(own_keys[i], limits[i], now)
    end
  else
    ok, remaining, reset, retry, delay, value, ttl, used, alert = ALGORITHMS[code](
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
      if code == 7 then budget_denied = true end
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
  writes[#writes + 1] = cp .. '!dn'
  writes[#writes + 1] = dn
  local _, window = parse_ban_policy(ban_policy)
  if window > ttl then ttl = window end
  if bn then
    writes[#writes + 1] = cp .. '!bn'
    writes[#writes + 1] = bn
    reply[3], reply[4] = 4, until_ - now
    if until_ - now + STRIKE_MEMORY > ttl then ttl = until_ - now + STRIKE_MEMORY end
  end
end
if #writes > 0 then
  local bucket_until = keep_until(cp, math.ceil((now + ttl) / 1000000), client_exp, bucket_exp, writes)
  redis.call('HSET', KEYS[1], unpack(writes))
  if bucket_until then expire_bucket(KEYS[1], bucket_until, now) end
  if now % SWEEP_ODDS == 0 then maybe_sweep(KEYS[1], now) end
end

if usage_at then
  if allowed then
    count_usage(usage_at, usage_days, usage, 'a', 1, 'w', unit_weight, 'c', cost)
  elseif budget_denied then
    count_usage(usage_at, usage_days, usage, 'db', 1)
  elseif reply[3] == 1 then
    count_usage(usage_at, usage_days, usage, 'dc', 1)
  else
    count_usage(usage_at, usage_days, usage, 'dr', 1)
  end
  if would_deny then count_usage(usage_at, usage_days, usage, 'sw', 1) end
end
return reply
