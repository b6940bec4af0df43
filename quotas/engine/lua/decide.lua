-- One decision for one request: every limit window is checked, and only if
-- none denies (shadow windows never deny) are they all consumed. Lua scripts
-- run atomically, so this is all-or-nothing under any concurrency. The same
-- call counts the request in the usage hash of the client's bucket and day,
-- and keeps the client's ban state (escalation).
--
-- It is on every request's path, so it is written to do little: one TIME, one
-- HMGET, one HSET and two HINCRBY for a request whose windows are all
-- counter-style (more for sliding logs, leases, bans, or a new day or client),
-- one table per window, and code that few requests need is only built when
-- one does (see period.lua).
--
-- KEYS[1]  the client's bucket hash (fields "<client>|<window>", see bucket.lua)
-- KEYS[2]  the bucket's usage key of the day DECIDE_ARG_DAY names ("...:<YYYYMMDD>")
-- KEYS[3+] the client's own-key windows (sliding logs, concurrency sets), in
--          the order of their specs (all keys carry the bucket's {hash tag})
-- ARGV, by the slot names of quotas.engine.protocol.DecideArg (generated as DECIDE_ARG_*):
--   NOW          now in microseconds, or '' to use the Redis server's clock
--   WEIGHT       the request's weight for every rate window, or '' for each window's own
--   COST         the request's estimated cost in micro-units (budget windows spend it)
--   USAGE        the usage field prefix "<plan>|<scope>", or '' not to count
--   MODE         '' decide; 'peek' read only; 'acl-allow' / 'acl-deny' only
--                count a request an allow / deny list decided
--   MULTIPLIER   the adaptive multiplier of the client's plan ('' = 1): it scales
--                the rolling rate windows (codes 1-5), never periods or budgets
--   BAN_POLICY   the plan's ban policy "<refusals> <window us> <duration us,...>", or ''
--   REQUEST_ID   the request's id (for concurrency leases), or ''
--   FIELD_PREFIX the client's field prefix "<client>|"
--   DAY          the day of KEYS[2] in days since 1970 (the application's clock), or ''
-- then ARGV[DECIDE_FIXED_ARGS + i], window i's spec (quotas.engine.protocol.WindowSpec;
--          parse_spec in common.lua)
-- Returns  quotas.engine.protocol.DecideReply: a head {allowed, now, flags, ban wait}
--          (slots REPLY_*), then per window: ok, remaining, reset, retry,
--          delay, used (periods), alert mask (periods) (slots WINDOW_REPLY_*);
--          flags: FLAG_REDUCED_ONLY, FLAG_BANNED or FLAG_BAN_STARTED;
--          ban wait: us until the ban ends.
local now
if ARGV[DECIDE_ARG_NOW] == '' then now = server_now() else now = tonumber(ARGV[DECIDE_ARG_NOW]) end
local weight = tonumber(ARGV[DECIDE_ARG_WEIGHT])
local cost = tonumber(ARGV[DECIDE_ARG_COST]) or 0
local cp = ARGV[DECIDE_ARG_FIELD_PREFIX]
-- Usage fields are "<client>|<plan>|<scope>|<counter>" in the bucket's hash of the day.
local usage = ARGV[DECIDE_ARG_USAGE] ~= '' and cp .. ARGV[DECIDE_ARG_USAGE] or ''
local mode = ARGV[DECIDE_ARG_MODE]
local multiplier = tonumber(ARGV[DECIDE_ARG_MULTIPLIER]) or 1
local ban_policy = ARGV[DECIDE_ARG_BAN_POLICY]
local n = #ARGV - DECIDE_FIXED_ARGS

local usage_at, usage_days
if usage ~= '' then usage_at, usage_days = usage_key(KEYS[2], tonumber(ARGV[DECIDE_ARG_DAY]), now) end

-- A reply's head (slots REPLY_*): allowed (1 or 0), now, no flags, no ban wait.
local function reply_head(allowed)
  local head = {}
  head[REPLY_ALLOWED], head[REPLY_NOW_US], head[REPLY_FLAGS], head[REPLY_BAN_WAIT_US] = allowed, now, 0, 0
  return head
end

if mode == 'acl-allow' then
  if usage_at then count_usage(usage_at, usage_days, usage, 'a', 1, 'wx', (weight or 1) - 1, 'c', cost) end
  return reply_head(1)
elseif mode == 'acl-deny' then
  if usage_at then count_usage(usage_at, usage_days, usage, 'da', 1) end
  return reply_head(0)
end

-- Every window's spec, parsed once (parse_spec in common.lua). Then, per window:
--   w.weight   what this request takes from it (its own weight, the request's,
--              the cost for a budget, 1 for a count of requests)
--   w.field    the bucket field (counter-style windows) or the own key (logs, leases)
--   w.raw_index  counter-style windows: where its value is in the HMGET reply
-- and once checked: w.ok, w.value (new state, or a log's count), w.ttl.
local windows = {}
-- The fields to read: every counter-style window's, then the client's and the
-- bucket's expiry, then the ban state.
local hash_fields = {}
local unit_weight = weight or 1
local next_key = 3
for i = 1, n do
  local w = parse_spec(ARGV[DECIDE_FIXED_ARGS + i])
  local code = w.code
  if code == BUDGET then
    w.weight = cost
  elseif code == PERIOD_REQUESTS or code == CONCURRENCY then
    w.weight = 1  -- requests, whatever their weight
  else
    w.weight = weight or w.weight
    if w.weight > unit_weight then unit_weight = w.weight end
  end
  if code == SLIDING_WINDOW_LOG or code == CONCURRENCY then
    w.field = KEYS[next_key]
    next_key = next_key + 1
  else
    w.field = cp .. w.field
    hash_fields[#hash_fields + 1] = w.field
    w.raw_index = #hash_fields
  end
  windows[i] = w
end
local counters = #hash_fields
hash_fields[counters + 1] = cp .. '~'
hash_fields[counters + 2] = '~'
local parse_ban_policy, parse_ban, note_refusal
if ban_policy ~= '' then
  parse_ban_policy, parse_ban, note_refusal = load_bans()
  hash_fields[counters + 3] = cp .. '!dn'
  hash_fields[counters + 4] = cp .. '!bn'
end
local values = redis.call('HMGET', KEYS[1], unpack(hash_fields))
local client_exp, bucket_exp = values[counters + 1], values[counters + 2]
local raw_dn, raw_bn = values[counters + 3], values[counters + 4]

local reply = reply_head(0)
if ban_policy ~= '' then
  local until_ = parse_ban(raw_bn, now)
  if until_ > now then
    -- Banned: refused without looking at the limits.
    reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = FLAG_BANNED, until_ - now
    if mode ~= 'peek' and usage_at then count_usage(usage_at, usage_days, usage, 'dx', 1) end
    return reply
  end
end

local log_check, log_commit, lease_check, lease_commit
-- Decide window `w` at `limit` and `cap` (scaled or not). -> ok, remaining,
-- reset, retry, delay, value (new state or log count), ttl, used, alert
local function check(w, limit, cap)
  local code = w.code
  if code == SLIDING_WINDOW_LOG then
    if not log_check then log_check, log_commit = load_sliding_log() end
    return log_check(w.field, limit, w.window, w.weight, now)
  elseif code == CONCURRENCY then
    if not lease_check then lease_check, lease_commit = load_leases() end
    return lease_check(w.field, limit, now)
  end
  return ALGORITHMS[code](w, values[w.raw_index], limit, cap, now)
end

local allowed, budget_denied, would_deny, scaled = true, false, false, multiplier ~= 1
for i, w in ipairs(windows) do
  local limit, cap = w.limit, w.cap
  if scaled and w.code <= LEAKY_BUCKET then  -- the rolling rates: periods and budgets are never scaled
    limit = math.max(1, math.floor(limit * multiplier))
    cap = math.max(1, math.floor(cap * multiplier))
  end
  local ok, remaining, reset, retry, delay, value, ttl, used, alert = check(w, limit, cap)
  w.ok, w.value, w.ttl = ok, value, ttl
  if not ok then
    if w.shadow then
      would_deny = true
    else
      allowed = false
      if w.code == BUDGET then budget_denied = true end
    end
  end
  local base = REPLY_HEAD + (i - 1) * REPLY_PER_WINDOW
  reply[base + WINDOW_REPLY_OK] = ok and 1 or 0
  reply[base + WINDOW_REPLY_REMAINING] = math.floor(remaining)
  reply[base + WINDOW_REPLY_RESET_US] = math.ceil(math.max(reset, 0))
  reply[base + WINDOW_REPLY_RETRY_US] = math.ceil(retry)
  reply[base + WINDOW_REPLY_DELAY_US] = math.ceil(delay)
  reply[base + WINDOW_REPLY_USED] = used or 0
  reply[base + WINDOW_REPLY_ALERT] = alert or 0
end
if allowed then reply[REPLY_ALLOWED] = 1 end

if not allowed and multiplier < 1 then
  -- Would the request pass at full capacity? Then only the reduction refused it.
  local would_pass = true
  for _, w in ipairs(windows) do
    if not check(w, w.limit, w.cap) and not w.shadow then would_pass = false end
  end
  if would_pass then reply[REPLY_FLAGS] = FLAG_REDUCED_ONLY end
end
if mode == 'peek' then return reply end

local writes, ttl = {}, 0
for _, w in ipairs(windows) do
  local code = w.code
  -- Consume when all allow; a refused budget still records its 100 % alert.
  if (allowed and w.ok) or (not w.ok and code == BUDGET and w.value) then
    if code == SLIDING_WINDOW_LOG then
      log_commit(w.field, w.window, w.weight, now, w.value)
    elseif code == CONCURRENCY then
      lease_commit(w.field, w.window, now, ARGV[DECIDE_ARG_REQUEST_ID])
    else
      writes[#writes + 1] = w.field
      writes[#writes + 1] = w.value
      if w.ttl > ttl then ttl = w.ttl end
    end
  end
end
if not allowed and ban_policy ~= '' and reply[REPLY_FLAGS] == 0 then
  -- Refusals for abuse count toward a ban; refusals caused by load shedding do not.
  local dn, bn, until_ = note_refusal(ban_policy, raw_dn, raw_bn, now)
  writes[#writes + 1] = cp .. '!dn'
  writes[#writes + 1] = dn
  local _, window = parse_ban_policy(ban_policy)
  if window > ttl then ttl = window end
  if bn then
    writes[#writes + 1] = cp .. '!bn'
    writes[#writes + 1] = bn
    reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = FLAG_BAN_STARTED, until_ - now
    if until_ - now + STRIKE_MEMORY > ttl then ttl = until_ - now + STRIKE_MEMORY end
  end
end
if #writes > 0 then
  local bucket_until = keep_until(cp, math.ceil((now + ttl) / 1000000), client_exp, bucket_exp, writes)
  redis.call('HSET', KEYS[1], unpack(writes))
  if bucket_until then expire_bucket(KEYS[1], bucket_until, now) end
  maybe_sweep(KEYS[1], now)
end

if usage_at then
  if allowed then
    count_usage(usage_at, usage_days, usage, 'a', 1, 'wx', unit_weight - 1, 'c', cost)
  elseif budget_denied then
    count_usage(usage_at, usage_days, usage, 'db', 1)
  elseif reply[REPLY_FLAGS] == FLAG_REDUCED_ONLY then
    count_usage(usage_at, usage_days, usage, 'dc', 1)
  else
    count_usage(usage_at, usage_days, usage, 'dr', 1)
  end
  if would_deny then count_usage(usage_at, usage_days, usage, 'sw', 1) end
end
return reply
