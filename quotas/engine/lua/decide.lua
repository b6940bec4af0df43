-- decide(keys, args): one decision for one request. Every limit window is
-- checked, and only if none denies (shadow windows never deny) are they all
-- consumed. A script or function runs atomically, so this is all-or-nothing
-- under any concurrency. The same call counts the request in the usage hash
-- of the client's bucket and day, and keeps the client's ban state.
--
-- It is on every request's path, so it is written to do little: one TIME,
-- one HMGET, one HSET and one HINCRBY for a request whose windows are all
-- counter-style (more for sliding logs, leases, bans, or a new day or
-- client). Each spec is unpacked into named locals rather than a table per
-- window, and the new state goes straight into the HSET's argument list
-- (make bench, 2026-11-23: a table per window cost about 1 us of the 5-limit
-- decision's Lua time per window; see the README's benchmark section).
--
-- keys[1]  the client's bucket hash (fields "<client>|<window>", see bucket.lua)
-- keys[2]  the bucket's usage key of the day DECIDE_ARG_DAY names ("...:<YYYYMMDD>")
-- keys[3+] the client's own-key windows (sliding logs, concurrency sets), in
--          the order of their specs (all keys carry the bucket's {hash tag})
-- args, by the slot names of quotas.engine.protocol.DecideArg (generated as DECIDE_ARG_*):
--   NOW          now in microseconds, or '' to use the Redis server's clock
--   WEIGHT       the request's weight for every rate window, or '' for each window's own
--   COST         the request's estimated cost in micro-units (budget windows spend it)
--   USAGE        the usage field prefix "<plan>|<scope>", or '' not to count
--   MODE         '' decide; 'peek' read only; 'acl-allow' / 'acl-deny' only
--                count a request an allow / deny list decided
--   MULTIPLIER   the adaptive multiplier of the client's plan ('' = 1): it scales
--                the rolling rate windows, never periods or budgets
--   BAN_POLICY   the plan's ban policy "<refusals> <window us> <duration us,...>", or ''
--   REQUEST_ID   the request's id (for concurrency leases), or ''
--   FIELD_PREFIX the client's field prefix "<client>|"
--   DAY          the day of keys[2] in days since 1970 (the application's clock), or ''
-- then args[DECIDE_FIXED_ARGS + i], window i's spec (quotas.engine.protocol.WindowSpec,
--          see common.lua)
-- Returns  quotas.engine.protocol.DecideReply: a head {allowed, now, flags, ban wait}
--          (slots REPLY_*), then per window: ok, remaining, reset, retry,
--          delay, used (periods), alert mask (periods) (slots WINDOW_REPLY_*);
--          flags: FLAG_REDUCED_ONLY, FLAG_BANNED or FLAG_BAN_STARTED;
--          ban wait: us until the ban ends.

-- A reply's head (slots REPLY_*): allowed (1 or 0), now, no flags, no ban wait.
local function reply_head(allowed, now)
  local head = {}
  head[REPLY_ALLOWED], head[REPLY_NOW_US], head[REPLY_FLAGS], head[REPLY_BAN_WAIT_US] = allowed, now, 0, 0
  return head
end

-- What a request takes from a window: a budget its cost, a count of requests
-- or a lease one, any other window the request's weight or else the window's own.
local function window_weight(code, own_weight, weight, cost)
  if code == BUDGET then return cost end
  if code == PERIOD_REQUESTS or code == CONCURRENCY then return 1 end
  return weight or own_weight
end

-- One window's verdict at `limit` and `cap` (scaled or not): `raw` is its
-- field's value (counter-style windows), `key` its own key (logs, leases).
-- -> ok, remaining, reset, retry, delay, value (new state, or a log's
-- count), ttl, used, alert
local function check_window(code, limit, weight, a, cap, c, raw, key, now)
  if code == SLIDING_WINDOW_LOG then return log_check(key, limit, a, weight, now) end
  if code == CONCURRENCY then return lease_check(key, limit, now) end
  return ALGORITHMS[code](raw, limit, weight, a, cap, c, now)
end

-- Whether a request the adaptive multiplier refused would pass at full
-- capacity (then only the reduction refused it): every window checked again
-- at its own limit. Rare (refusals under reduced capacity), so it unpacks the
-- specs again rather than keep them all.
local function passes_at_full_capacity(keys, args, n, values, weight, cost, now)
  local counter, own_key = 0, 3
  for i = 1, n do
    local code, limit, a, cap, own_weight, c, shadow = struct.unpack(SPEC_FORMAT, args[DECIDE_FIXED_ARGS + i])
    local raw, key
    if HAS_OWN_KEY[code] then
      key, own_key = keys[own_key], own_key + 1
    else
      counter = counter + 1
      raw = values[counter]
    end
    local ok = check_window(code, limit, window_weight(code, own_weight, weight, cost), a, cap, c, raw, key, now)
    if not ok and shadow == 0 then return false end
  end
  return true
end

local function decide(keys, args)
  local now = args[DECIDE_ARG_NOW]
  if now == '' then now = server_now() else now = tonumber(now) end
  local weight = tonumber(args[DECIDE_ARG_WEIGHT])
  local cost = tonumber(args[DECIDE_ARG_COST]) or 0
  local cp = args[DECIDE_ARG_FIELD_PREFIX]
  local mode = args[DECIDE_ARG_MODE]
  local ban_policy = args[DECIDE_ARG_BAN_POLICY]
  local n = #args - DECIDE_FIXED_ARGS

  -- Usage fields are "<client>|<plan>|<scope>|<counter>" in the bucket's hash of the day.
  local usage, usage_at, usage_days = args[DECIDE_ARG_USAGE], nil, nil
  if usage ~= '' then
    usage = cp .. usage
    usage_at, usage_days = usage_key(keys[2], tonumber(args[DECIDE_ARG_DAY]), now)
  end
  if mode == 'acl-allow' then
    if usage_at then count_usage(usage_at, usage_days, usage, 'a', 1, 'wx', (weight or 1) - 1, 'c', cost) end
    return reply_head(1, now)
  elseif mode == 'acl-deny' then
    if usage_at then count_usage(usage_at, usage_days, usage, 'da', 1) end
    return reply_head(0, now)
  end

  -- The fields to read: every counter-style window's, then the client's and
  -- the bucket's expiry, then the ban state.
  local fields = {}
  for i = 1, n do
    local code, _, _, _, _, _, _, field = struct.unpack(SPEC_FORMAT, args[DECIDE_FIXED_ARGS + i])
    if not HAS_OWN_KEY[code] then fields[#fields + 1] = cp .. field end
  end
  local counters = #fields
  fields[counters + 1] = cp .. '~'
  fields[counters + 2] = '~'
  if ban_policy ~= '' then
    fields[counters + 3] = cp .. '!dn'
    fields[counters + 4] = cp .. '!bn'
  end
  local values = redis.call('HMGET', keys[1], unpack(fields))
  local raw_dn, raw_bn = values[counters + 3], values[counters + 4]

  local reply = reply_head(1, now)
  if ban_policy ~= '' then
    local until_ = parse_ban(raw_bn, now)
    if until_ > now then
      -- Banned: refused without looking at the limits.
      reply[REPLY_ALLOWED], reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = 0, FLAG_BANNED, until_ - now
      if mode ~= 'peek' and usage_at then count_usage(usage_at, usage_days, usage, 'dx', 1) end
      return reply
    end
  end

  -- Check every window. What an admission writes is gathered as it goes:
  -- `writes` (the HSET's field, value pairs, living `ttl` us) and `commits`
  -- (sliding logs and leases: code, key, window, weight, count); a refused
  -- budget's 100 % alert is written either way (`alerts`: field, value, ttl).
  local multiplier = tonumber(args[DECIDE_ARG_MULTIPLIER]) or 1
  local writes, alerts, commits, ttl = {}, nil, nil, 0
  local allowed, budget_denied, would_deny = true, false, false
  local unit_weight = weight or 1
  local counter, own_key = 0, 3
  for i = 1, n do
    local code, limit, a, cap, own_weight, c, shadow = struct.unpack(SPEC_FORMAT, args[DECIDE_FIXED_ARGS + i])
    local w = window_weight(code, own_weight, weight, cost)
    if w > unit_weight and code ~= BUDGET and code ~= PERIOD_REQUESTS and code ~= CONCURRENCY then unit_weight = w end
    if multiplier ~= 1 and code <= LEAKY_BUCKET then  -- the rolling rates: periods and budgets are never scaled
      limit = math.max(1, math.floor(limit * multiplier))
      cap = math.max(1, math.floor(cap * multiplier))
    end
    local raw, key
    if HAS_OWN_KEY[code] then
      key, own_key = keys[own_key], own_key + 1
    else
      counter = counter + 1
      raw = values[counter]
    end
    local ok, remaining, reset, retry, delay, value, value_ttl, used, alert =
      check_window(code, limit, w, a, cap, c, raw, key, now)
    if ok then
      if key then
        commits = commits or {}
        local k = #commits
        commits[k + 1], commits[k + 2], commits[k + 3], commits[k + 4], commits[k + 5] = code, key, a, w, value
      else
        writes[#writes + 1] = fields[counter]
        writes[#writes + 1] = value
        if value_ttl > ttl then ttl = value_ttl end
      end
    else
      if shadow == 1 then
        would_deny = true
      else
        allowed = false
        if code == BUDGET then budget_denied = true end
      end
      if code == BUDGET and value then
        alerts = alerts or {}
        alerts[#alerts + 1], alerts[#alerts + 2], alerts[#alerts + 3] = fields[counter], value, value_ttl
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
  if not allowed then
    reply[REPLY_ALLOWED] = 0
    if multiplier < 1 and passes_at_full_capacity(keys, args, n, values, weight, cost, now) then
      reply[REPLY_FLAGS] = FLAG_REDUCED_ONLY
    end
  end
  if mode == 'peek' then return reply end

  if allowed then
    if commits then
      for k = 1, #commits, 5 do
        if commits[k] == SLIDING_WINDOW_LOG then
          log_commit(commits[k + 1], commits[k + 2], commits[k + 3], now, commits[k + 4])
        else
          lease_commit(commits[k + 1], commits[k + 2], now, args[DECIDE_ARG_REQUEST_ID])
        end
      end
    end
  else
    writes, ttl = {}, 0
  end
  if alerts then
    for k = 1, #alerts, 3 do
      writes[#writes + 1], writes[#writes + 2] = alerts[k], alerts[k + 1]
      if alerts[k + 2] > ttl then ttl = alerts[k + 2] end
    end
  end
  if not allowed then
    if ban_policy ~= '' and reply[REPLY_FLAGS] == 0 then
      -- Refusals for abuse count toward a ban; refusals caused by load shedding do not.
      local dn, bn, until_ = note_refusal(ban_policy, raw_dn, raw_bn, now)
      writes[#writes + 1], writes[#writes + 2] = cp .. '!dn', dn
      local _, window = parse_ban_policy(ban_policy)
      if window > ttl then ttl = window end
      if bn then
        writes[#writes + 1], writes[#writes + 2] = cp .. '!bn', bn
        reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = FLAG_BAN_STARTED, until_ - now
        if until_ - now + STRIKE_MEMORY > ttl then ttl = until_ - now + STRIKE_MEMORY end
      end
    end
  end
  if #writes > 0 then
    local bucket_until = keep_until(cp, math.ceil((now + ttl) / 1000000), values[counters + 1], values[counters + 2], writes)
    redis.call('HSET', keys[1], unpack(writes))
    if bucket_until then expire_bucket(keys[1], bucket_until, now) end
    maybe_sweep(keys[1], now)
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
end
