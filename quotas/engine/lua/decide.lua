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
-- Nothing to iterate (`ipairs(list or NONE)`): never written to.
local NONE = {}

-- A reply's head (slots REPLY_*): allowed (1 or 0), now, no flags, no ban wait.
local function reply_head(allowed, now)
  local head = {}
  head[REPLY_ALLOWED], head[REPLY_NOW_US], head[REPLY_FLAGS], head[REPLY_BAN_WAIT_US] = allowed, now, 0, 0
  return head
end

-- Window i's slots of the reply (WINDOW_REPLY_*), from its check's results.
local function put_window_reply(reply, i, ok, remaining, reset, retry, delay, used, alert)
  local base = REPLY_HEAD + (i - 1) * REPLY_PER_WINDOW
  reply[base + WINDOW_REPLY_OK] = ok and 1 or 0
  reply[base + WINDOW_REPLY_REMAINING] = math.floor(remaining)
  reply[base + WINDOW_REPLY_RESET_US] = math.ceil(math.max(reset, 0))
  reply[base + WINDOW_REPLY_RETRY_US] = math.ceil(retry)
  reply[base + WINDOW_REPLY_DELAY_US] = math.ceil(delay)
  reply[base + WINDOW_REPLY_USED] = used or 0
  reply[base + WINDOW_REPLY_ALERT] = alert or 0
end

-- What a request takes from a window: a budget its cost, a count of requests
-- or a lease one, any other window the request's weight or else the window's
-- own. The second value says whether it was a weight (what usage counts).
local function window_weight(code, own_weight, weight, cost)
  if code == BUDGET then return cost, false end
  if code == PERIOD_REQUESTS or code == CONCURRENCY then return 1, false end
  return weight or own_weight, true
end

-- One window's verdict at `limit` and `cap_or_stop` (scaled or not): `raw`
-- is its field's value (counter-style windows), `key` its own key (logs,
-- leases). The spec's three numbers are passed as they came (see common.lua).
-- -> ok, remaining, reset, retry, delay, value (new state, or a log's
-- count), ttl, used, alert
local function check_window(code, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, raw, key, now)
  if code == SLIDING_WINDOW_LOG then return log_check(key, limit, window_or_start, weight, now) end
  if code == CONCURRENCY then return lease_check(key, limit, now) end
  return ALGORITHMS[code](raw, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, now)
end

-- Parse: the fixed arguments, by name. `usage_key` is nil when the call
-- counts no usage; `weight` nil when each window takes its own.
local function parse_request(keys, args)
  local now = args[DECIDE_ARG_NOW]
  if now == '' then now = server_now() else now = tonumber(now) end
  local request = {
    now = now,
    weight = tonumber(args[DECIDE_ARG_WEIGHT]),
    cost = tonumber(args[DECIDE_ARG_COST]) or 0,
    mode = args[DECIDE_ARG_MODE],
    multiplier = tonumber(args[DECIDE_ARG_MULTIPLIER]) or 1,
    ban_policy = args[DECIDE_ARG_BAN_POLICY],
    request_id = args[DECIDE_ARG_REQUEST_ID],
    prefix = args[DECIDE_ARG_FIELD_PREFIX],
    bucket = keys[1],
    windows = #args - DECIDE_FIXED_ARGS,
  }
  -- Usage fields are "<client>|<plan>|<scope>|<counter>" in the bucket's hash of the day.
  local usage = args[DECIDE_ARG_USAGE]
  if usage ~= '' then
    request.usage = request.prefix .. usage
    request.usage_key, request.usage_days = usage_key(keys[2], tonumber(args[DECIDE_ARG_DAY]), now)
  end
  return request
end

-- Add to the request's usage counters (see count_usage), if it counts any.
local function add_usage(request, n1, a1, n2, a2, n3, a3)
  if request.usage_key then
    count_usage(request.usage_key, request.usage_days, request.usage, n1, a1, n2, a2, n3, a3)
  end
end

-- Read, with one HMGET: every counter-style window's field (in the order of
-- the specs), then the client's and the bucket's expiry, then the ban state.
-- -> the fields read and their values, by name where they are not windows'.
local function read_state(request, args)
  local prefix, fields = request.prefix, {}
  for i = 1, request.windows do
    local code, _, _, _, _, _, _, field = struct.unpack(SPEC_FORMAT, args[DECIDE_FIXED_ARGS + i])
    if not HAS_OWN_KEY[code] then fields[#fields + 1] = prefix .. field end
  end
  local counters = #fields
  fields[counters + 1] = prefix .. '~'
  fields[counters + 2] = '~'
  if request.ban_policy ~= '' then
    fields[counters + 3] = prefix .. '!dn'
    fields[counters + 4] = prefix .. '!bn'
  end
  local values = redis.call('HMGET', request.bucket, unpack(fields))
  return {
    fields = fields,
    values = values,
    client_expiry = values[counters + 1],
    bucket_expiry = values[counters + 2],
    refusals = values[counters + 3],  -- '!dn' (nil without a ban policy)
    ban = values[counters + 4],  -- '!bn'
  }
end

-- Check the ban: a banned client is refused without looking at its limits.
-- -> the reply (a head alone), or nil when the client is not banned.
local function check_ban(request, state)
  if request.ban_policy == '' then return nil end
  local now = request.now
  local until_ = parse_ban(state.ban, now)
  if until_ <= now then return nil end
  local reply = reply_head(0, now)
  reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = FLAG_BANNED, until_ - now
  if request.mode ~= 'peek' then add_usage(request, 'dx', 1) end
  return reply
end

-- Note what admitting the request writes for a window that allows it: a
-- sliding log or a lease is committed from a table of its own, any other
-- window's new state joins the HSET.
local function note_allowed(outcome, code, key, field, window, weight, value, ttl)
  if key then
    outcome.pending = outcome.pending or {}
    table.insert(outcome.pending, {code = code, key = key, window = window, weight = weight, count = value})
  else
    local writes = outcome.writes
    writes[#writes + 1], writes[#writes + 2] = field, value
    if ttl > outcome.ttl then outcome.ttl = ttl end
  end
end

-- Note a window that refuses: a shadow window only would have; a budget's
-- first refusal in a period leaves its 100 % alert to write either way.
local function note_refused(outcome, code, shadow, field, value, ttl)
  if shadow then
    outcome.would_deny = true
  else
    outcome.allowed = false
    if code == BUDGET then outcome.budget_denied = true end
  end
  if code == BUDGET and value then
    outcome.alerts = outcome.alerts or {}
    table.insert(outcome.alerts, {field = field, value = value, ttl = ttl})
  end
end

-- Check every window, writing its slots of the reply. -> the outcome: whether
-- the request is allowed (`allowed`; `budget_denied`, `would_deny` say why
-- not or what a shadow window would have done), its largest weight
-- (`unit_weight`), and what the decision writes:
--   writes, ttl  an admission's HSET (field, value pairs), living ttl us
--   pending      an admission's sliding logs and leases, a table each
--   alerts       refused budgets' 100 % alerts, a table each, written either way
local function check_windows(request, keys, args, state, reply)
  local outcome = {allowed = true, budget_denied = false, would_deny = false, unit_weight = request.weight or 1,
    writes = {}, ttl = 0, pending = nil, alerts = nil}
  local multiplier, counter, own_key = request.multiplier, 0, 3  -- the last field read, the next own key
  for i = 1, request.windows do
    local code, limit, window_or_start, cap_or_stop, own_weight, delay_or_next_stop, shadow =
      struct.unpack(SPEC_FORMAT, args[DECIDE_FIXED_ARGS + i])
    local weight, weighed = window_weight(code, own_weight, request.weight, request.cost)
    if weighed and weight > outcome.unit_weight then outcome.unit_weight = weight end
    if multiplier ~= 1 and code <= LEAKY_BUCKET then  -- the rolling rates: periods and budgets are never scaled
      limit = math.max(1, math.floor(limit * multiplier))
      cap_or_stop = math.max(1, math.floor(cap_or_stop * multiplier))
    end
    local raw, key, field
    if HAS_OWN_KEY[code] then
      key, own_key = keys[own_key], own_key + 1
    else
      counter = counter + 1
      field, raw = state.fields[counter], state.values[counter]
    end
    local ok, remaining, reset, retry, delay, value, ttl, used, alert =
      check_window(code, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, raw, key, request.now)
    if ok then
      note_allowed(outcome, code, key, field, window_or_start, weight, value, ttl)
    else
      note_refused(outcome, code, shadow == 1, field, value, ttl)
    end
    put_window_reply(reply, i, ok, remaining, reset, retry, delay, used, alert)
  end
  return outcome
end

-- Whether a request the adaptive multiplier refused would pass at full
-- capacity (then only the reduction refused it): every window checked again
-- at its own limit. Rare (refusals under reduced capacity), so it unpacks the
-- specs again rather than keep them all.
local function passes_at_full_capacity(request, keys, args, state)
  local counter, own_key = 0, 3
  for i = 1, request.windows do
    local code, limit, window_or_start, cap_or_stop, own_weight, delay_or_next_stop, shadow =
      struct.unpack(SPEC_FORMAT, args[DECIDE_FIXED_ARGS + i])
    local raw, key
    if HAS_OWN_KEY[code] then
      key, own_key = keys[own_key], own_key + 1
    else
      counter = counter + 1
      raw = state.values[counter]
    end
    local weight = window_weight(code, own_weight, request.weight, request.cost)
    local ok =
      check_window(code, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, raw, key, request.now)
    if not ok and shadow == 0 then return false end
  end
  return true
end

-- A refusal for abuse (not for load shedding: the reply's flags are still 0)
-- counts toward a ban: adds the ban state to `writes` and, when this refusal
-- starts a ban, says so in the reply. -> the HSET's new ttl
local function note_ban_refusal(request, state, writes, ttl, reply)
  local now = request.now
  local refusals, ban, until_ = note_refusal(request.ban_policy, state.refusals, state.ban, now)
  writes[#writes + 1], writes[#writes + 2] = request.prefix .. '!dn', refusals
  local _, window = parse_ban_policy(request.ban_policy)
  if window > ttl then ttl = window end
  if ban then
    writes[#writes + 1], writes[#writes + 2] = request.prefix .. '!bn', ban
    reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = FLAG_BAN_STARTED, until_ - now
    if until_ - now + STRIKE_MEMORY > ttl then ttl = until_ - now + STRIKE_MEMORY end
  end
  return ttl
end

-- Commit: an admission consumes every window (sliding logs and leases, then
-- the HSET of the others' new state); a refusal writes only budgets' alerts
-- and the ban state. The bucket's expiry bookkeeping rides on the same HSET.
local function commit(request, state, outcome, reply)
  local now, writes, ttl = request.now, {}, 0
  if outcome.allowed then
    for _, p in ipairs(outcome.pending or NONE) do
      if p.code == SLIDING_WINDOW_LOG then
        log_commit(p.key, p.window, p.weight, now, p.count)
      else
        lease_commit(p.key, p.window, now, request.request_id)
      end
    end
    writes, ttl = outcome.writes, outcome.ttl
  end
  for _, alert in ipairs(outcome.alerts or NONE) do
    writes[#writes + 1], writes[#writes + 2] = alert.field, alert.value
    if alert.ttl > ttl then ttl = alert.ttl end
  end
  if not outcome.allowed and request.ban_policy ~= '' and reply[REPLY_FLAGS] == 0 then
    ttl = note_ban_refusal(request, state, writes, ttl, reply)
  end
  if #writes == 0 then return end
  local bucket = request.bucket
  local bucket_until =
    keep_until(request.prefix, math.ceil((now + ttl) / 1000000), state.client_expiry, state.bucket_expiry, writes)
  redis.call('HSET', bucket, unpack(writes))
  if bucket_until then expire_bucket(bucket, bucket_until, now) end
  maybe_sweep(bucket, now)
end

-- Count: the decision in the usage counters (allowed with its weight beyond
-- one and its cost, or the reason it was refused), and a shadow window's
-- refusal.
local function count_decision(request, outcome, reply)
  if not request.usage_key then return end
  if outcome.allowed then
    add_usage(request, 'a', 1, 'wx', outcome.unit_weight - 1, 'c', request.cost)
  elseif outcome.budget_denied then
    add_usage(request, 'db', 1)
  elseif reply[REPLY_FLAGS] == FLAG_REDUCED_ONLY then
    add_usage(request, 'dc', 1)
  else
    add_usage(request, 'dr', 1)
  end
  if outcome.would_deny then add_usage(request, 'sw', 1) end
end

-- parse -> (ACL modes: count only) -> read -> check the ban, then the windows
-- -> (peek: reply) -> commit -> count.
local function decide(keys, args)
  local request = parse_request(keys, args)
  if request.mode == 'acl-allow' then
    add_usage(request, 'a', 1, 'wx', (request.weight or 1) - 1, 'c', request.cost)
    return reply_head(1, request.now)
  elseif request.mode == 'acl-deny' then
    add_usage(request, 'da', 1)
    return reply_head(0, request.now)
  end
  local state = read_state(request, args)
  local banned = check_ban(request, state)
  if banned then return banned end
  local reply = reply_head(1, request.now)
  local outcome = check_windows(request, keys, args, state, reply)
  if not outcome.allowed then
    reply[REPLY_ALLOWED] = 0
    if request.multiplier < 1 and passes_at_full_capacity(request, keys, args, state) then
      reply[REPLY_FLAGS] = FLAG_REDUCED_ONLY
    end
  end
  if request.mode == 'peek' then return reply end
  commit(request, state, outcome, reply)
  count_decision(request, outcome, reply)
  return reply
end
