-- decide(keys, args): one decision for one request. Every limit window is
-- checked, and only if none denies (shadow windows never deny) are they all
-- consumed. A script or function runs atomically, so this is all-or-nothing
-- under any concurrency. The same call counts the request in the usage hash
-- of the client's bucket and day, and keeps the client's ban state.
--
-- decide() reads as its phases: parse the arguments, read the client's state
-- (one HMGET), check the ban and then every window (check_windows), commit
-- (commit_admission or commit_refusal: logs and leases, one HSET) and count
-- (count_decision). It is on every request's path, so it is written to do
-- little: one TIME, one HMGET, one HSET and one HINCRBY for a request whose
-- windows are all counter-style (more for sliding logs, leases, bans, or a
-- new day or client). Values pass between the phases as named arguments and
-- return values, not in tables: each spec is unpacked into named locals, not
-- a table per window; only a sliding log or lease to commit and a budget
-- alert to write get a small table of named fields. What these choices were
-- measured at is in docs/benchmark-history.md ("The decision script's shape").
--
-- keys[1]  the client's bucket hash (fields "<client>|<window>", see bucket.lua)
-- keys[2]  the bucket's usage key of the day DECIDE_ARG_DAY names ("...:<YYYYMMDD>")
-- keys[3+] the client's own-key windows (sliding logs, concurrency sets), in
--          the order of their specs (all keys carry the bucket's {hash tag})
-- args     the fixed slots of quotas.contract.protocol.DecideArg, each described
--          there (generated here as DECIDE_ARG_*), then from
--          args[DECIDE_FIXED_ARGS + 1] each window's spec
--          (quotas.contract.protocol.WindowSpec, see common.lua)
-- Returns  quotas.contract.protocol.DecideReply: a head (slots REPLY_*), then
--          per window the slots WINDOW_REPLY_* (quotas.contract.protocol.WindowReply);
--          the flags are FLAG_* (quotas.contract.protocol.DecideFlag).

-- Where the fields read_state asks for after the counter-style windows' sit
-- in the HMGET's reply (the last two only with a ban policy).
local CLIENT_EXPIRY = 1
local REFUSALS = 2
local BAN = 3

-- A reply's head (slots REPLY_*, in DecideReply's order, which the client
-- also reads by position): allowed (1 or 0), now, no flags, no ban wait, one
-- request granted. With `windows`, the first window's slots are made with it
-- (at 0, for check_windows to write), so that a one-window reply is sized by
-- its constructor rather than grown twice as its slots are written (each
-- growth rehashes the table): 123.0k -> 119.9k a 1-limit decision on Redis 7.0.
local function reply_head(allowed, now, windows)
  if windows then return {allowed, now, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0} end  -- REPLY_HEAD + REPLY_PER_WINDOW slots
  return {allowed, now, 0, 0, 1}
end

-- Window i's slots of the reply (WINDOW_REPLY_*), from its check's results.
local function put_window_reply(reply, i, ok, remaining, reset, retry, delay, used, alert)
  local base = REPLY_HEAD + (i - 1) * REPLY_PER_WINDOW
  -- Rounded by math's functions only when not whole already (a compare is cheaper than a call).
  local floor, ceil = math.floor, math.ceil
  if reset < 0 then reset = 0 end
  reply[base + WINDOW_REPLY_OK] = ok and 1 or 0
  reply[base + WINDOW_REPLY_REMAINING] = floor(remaining)
  reply[base + WINDOW_REPLY_RESET_US] = ceil(reset)
  reply[base + WINDOW_REPLY_RETRY_US] = retry == 0 and 0 or ceil(retry)
  reply[base + WINDOW_REPLY_DELAY_US] = delay == 0 and 0 or ceil(delay)
  reply[base + WINDOW_REPLY_USED] = used or 0
  reply[base + WINDOW_REPLY_ALERT] = alert or 0
end

-- What a request takes from a window: a budget its cost, a count of requests
-- or a lease one, any other window the request's weight or else the window's
-- own. The second value says whether it was a weight (what usage counts).
local function window_weight(code, own_weight, request_weight, cost)
  if code == BUDGET then return cost, false end
  if code == PERIOD_REQUESTS or code == CONCURRENCY then return 1, false end
  return request_weight or own_weight, true
end

-- One window's verdict at `limit` and `cap_or_stop` (scaled or not): `raw`
-- is its field's value (counter-style windows), `key` its own key (logs,
-- leases). The spec's three numbers are passed as they came (see common.lua).
-- -> ok, remaining, reset, retry, delay, value (new state, or a log's
-- count), ttl, used, alert
local function check_window(code, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, raw, key, now,
                            reserve)
  if code == SLIDING_WINDOW_LOG then return log_check(key, limit, window_or_start, weight, now) end
  if code == CONCURRENCY then return lease_check(key, limit, now) end
  return ALGORITHMS[code](raw, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, now, reserve)
end

-- Parse the request's numbers and the route's options (DECIDE_ARG_OPTIONS:
-- "" for most routes, else the parts of quotas.contract.protocol.DecideOption
-- in its order). -> now (us), the request's weight (nil: each window takes
-- its own), cost (micro-units), multiplier, mode, ban policy ("" for none).
-- (An empty slot is compared, not converted: tonumber('') costs as much as a number's.)
local function parse_arguments(args)
  local cost, now, weight, mode, multiplier, ban_policy = args[DECIDE_ARG_COST], '', '', '', '', ''
  if args[DECIDE_ARG_OPTIONS] ~= '' then
    now, weight, mode, multiplier, ban_policy = string.match(args[DECIDE_ARG_OPTIONS], DECIDE_OPTIONS)
  end
  if now == '' then now = server_now() else now = tonumber(now) end
  if weight == '' then weight = nil else weight = tonumber(weight) end
  if cost == '0' or cost == '' then cost = 0 else cost = tonumber(cost) end
  if multiplier == '' then multiplier = 1 else multiplier = tonumber(multiplier) or 1 end
  return now, weight, cost, multiplier, mode, ban_policy
end

-- Parse where the request is counted: fields "<client>|<plan>|<scope>|<counter>"
-- of the bucket's usage hash of the day. -> the fields' prefix, the hash and
-- its day (count_usage's first three arguments), or nil not to count.
local function parse_usage(keys, args, now)
  local usage = args[DECIDE_ARG_USAGE]
  if usage == '' then return nil end
  -- The offset (always a number) is converted by usage_key's arithmetic: half of what tonumber() costs.
  local key, days = usage_key(keys[2], tonumber(args[DECIDE_ARG_DAY]), now, args[DECIDE_ARG_DAY_OFFSET])
  return args[DECIDE_ARG_FIELD_PREFIX] .. usage, key, days
end

-- Read, with one HMGET: every counter-style window's field (in the order of
-- the specs), then the client's expiry and, with a ban policy, the ban state
-- (at CLIENT_EXPIRY ... BAN after the windows'). The bucket's own expiry is
-- read by keep_until only when the client's must be raised (about once a
-- minute a client): one field less on every other decision, 116.2k -> 113.1k
-- instructions a 1-limit decision on Redis 7.0.
-- -> the fields, their values, the number of windows' fields
local function read_state(bucket, args, prefix, ban_policy)
  -- Sized by its constructor for a window's field and the client's expiry (not grown, rehashing, slot by slot).
  local fields = {nil, nil}
  for i = 1, #args - DECIDE_FIXED_ARGS do
    -- The code (the spec's first byte) and the field (its tail) only: cheaper than unpacking the spec.
    local spec = args[DECIDE_FIXED_ARGS + i]
    if not HAS_OWN_KEY[string.byte(spec)] then fields[#fields + 1] = prefix .. string.sub(spec, SPEC_FIELD_AT) end
  end
  local counters = #fields
  fields[counters + CLIENT_EXPIRY] = prefix .. '~'
  if ban_policy ~= '' then
    fields[counters + REFUSALS] = prefix .. '!dn'
    fields[counters + BAN] = prefix .. '!bn'
  end
  return fields, redis.call('HMGET', bucket, unpack(fields)), counters
end

-- The reply to a banned client (refused without looking at its limits), or
-- nil when `raw_ban` (its '!bn' field) holds no ban in force.
local function banned_reply(raw_ban, now)
  local until_ = parse_ban(raw_ban, now)
  if until_ <= now then return nil end
  local reply = reply_head(0, now)
  reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = FLAG_BANNED, until_ - now
  return reply
end

-- A refused request is charged nothing: the periods and budgets that would have admitted it report what
-- they held before it (used, remaining) and no threshold (nothing was stored). Rare (refusals only), so it
-- unpacks the specs again rather than keep each window's weight.
local function uncharge_periods(args, reply, request_weight, cost, times)
  for i = 1, #args - DECIDE_FIXED_ARGS do
    local code, limit, _, _, own_weight = struct.unpack(SPEC_NUMBERS, args[DECIDE_FIXED_ARGS + i])
    local base = REPLY_HEAD + (i - 1) * REPLY_PER_WINDOW
    if IS_PERIOD[code] and reply[base + WINDOW_REPLY_OK] == 1 then
      local weight = window_weight(code, own_weight, request_weight, cost) * times
      local used = math.max(0, reply[base + WINDOW_REPLY_USED] - weight)
      reply[base + WINDOW_REPLY_USED] = used
      reply[base + WINDOW_REPLY_REMAINING] = math.max(0, limit - used)
      reply[base + WINDOW_REPLY_ALERT] = 0
    end
  end
end

-- Check every window, writing its slots of the reply and appending an
-- admission's new state of counter-style windows to `writes` (the HSET's
-- field, value pairs). -> the verdict and what else the decision writes:
--   allowed        no window refuses (shadow windows never do)
--   budget_denied  a budget is among the windows that refuse
--   would_deny     a shadow window would have refused
--   unit_weight    the request's largest weight (what usage counts)
--   ttl            how long (us) `writes` must live
--   pending        an admission's sliding logs and leases, a table each, or nil
--   alerts         refused budgets' 100 % alerts, a table each, or nil: written either way
-- `times` > 1 checks (and would consume) that many requests' units at once:
-- an allowance, whose sliding-log units are recorded at `log_at` (its end).
local function check_windows(keys, args, fields, values, now, request_weight, cost, multiplier, writes, reply,
                             times, log_at)
  local allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts =
    true, false, false, request_weight or 1, 0, nil, nil
  local counter, own_key = 0, 3  -- the last field read, the next own key
  for i = 1, #args - DECIDE_FIXED_ARGS do
    local code, limit, window_or_start, cap_or_stop, own_weight, delay_or_next_stop, shadow =
      struct.unpack(SPEC_NUMBERS, args[DECIDE_FIXED_ARGS + i])
    local weight, weighed = window_weight(code, own_weight, request_weight, cost)
    if weighed and weight > unit_weight then unit_weight = weight end
    -- An allowance's later requests: reserved in a budget, not yet spent (they raise no alert level).
    local reserve = code == BUDGET and weight * (times - 1) or 0
    weight = weight * times
    if multiplier ~= 1 and code <= LEAKY_BUCKET then  -- the rolling rates: periods and budgets are never scaled
      limit = math.max(1, math.floor(limit * multiplier))
      cap_or_stop = math.max(1, math.floor(cap_or_stop * multiplier))
    end
    local raw, key, field
    if HAS_OWN_KEY[code] then
      key, own_key = keys[own_key], own_key + 1
    else
      counter = counter + 1
      field, raw = fields[counter], values[counter]
    end
    local ok, remaining, reset, retry, delay, value, value_ttl, used, alert =
      check_window(code, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, raw, key, now, reserve)
    if ok and key then  -- a sliding log or a lease: committed from a table of its own
      pending = pending or {}
      pending[#pending + 1] = {code = code, key = key, window = window_or_start, weight = weight, count = value,
        at = log_at}
    elseif ok then  -- any other window's new state joins the HSET
      writes[#writes + 1], writes[#writes + 2] = field, value
      if value_ttl > ttl then ttl = value_ttl end
    elseif shadow == 1 then
      would_deny = true
    else
      allowed, budget_denied = false, budget_denied or code == BUDGET
    end
    if not ok and code == BUDGET and value then  -- a budget's first refusal in its period: its 100 % alert
      alerts = alerts or {}
      alerts[#alerts + 1] = {field = field, value = value, ttl = value_ttl}
    end
    put_window_reply(reply, i, ok, remaining, reset, retry, delay, used, alert)
  end
  if not allowed then uncharge_periods(args, reply, request_weight, cost, times) end
  return allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts
end

-- Whether a request the adaptive multiplier refused would pass at full
-- capacity (then only the reduction refused it): every window checked again
-- at its own limit. Rare (refusals under reduced capacity), so it unpacks the
-- specs again rather than keep them all.
local function passes_at_full_capacity(keys, args, values, now, request_weight, cost)
  local counter, own_key = 0, 3
  for i = 1, #args - DECIDE_FIXED_ARGS do
    local code, limit, window_or_start, cap_or_stop, own_weight, delay_or_next_stop, shadow =
      struct.unpack(SPEC_NUMBERS, args[DECIDE_FIXED_ARGS + i])
    local raw, key
    if HAS_OWN_KEY[code] then
      key, own_key = keys[own_key], own_key + 1
    else
      counter = counter + 1
      raw = values[counter]
    end
    local weight = window_weight(code, own_weight, request_weight, cost)
    local ok =
      check_window(code, limit, weight, window_or_start, cap_or_stop, delay_or_next_stop, raw, key, now)
    if not ok and shadow == 0 then return false end
  end
  return true
end

-- A refusal for abuse (not for load shedding: the reply's flags are still 0)
-- counts toward a ban: adds the ban state to `writes` and, when this refusal
-- starts a ban, says so in the reply. -> the HSET's new ttl
local function note_ban_refusal(prefix, policy, raw_refusals, raw_ban, now, writes, ttl, reply)
  local refusals, ban, until_ = note_refusal(policy, raw_refusals, raw_ban, now)
  writes[#writes + 1], writes[#writes + 2] = prefix .. '!dn', refusals
  local _, window = parse_ban_policy(policy)
  if window > ttl then ttl = window end
  if ban then
    writes[#writes + 1], writes[#writes + 2] = prefix .. '!bn', ban
    reply[REPLY_FLAGS], reply[REPLY_BAN_WAIT_US] = FLAG_BAN_STARTED, until_ - now
    if until_ - now + STRIKE_MEMORY > ttl then ttl = until_ - now + STRIKE_MEMORY end
  end
  return ttl
end

-- Append refused budgets' 100 % alerts (from check_windows) to `writes`.
-- -> the HSET's new ttl
local function add_alerts(writes, ttl, alerts)
  for _, alert in ipairs(alerts) do
    writes[#writes + 1], writes[#writes + 2] = alert.field, alert.value
    if alert.ttl > ttl then ttl = alert.ttl end
  end
  return ttl
end

-- Write `writes` (field, value pairs living `ttl` us) to the client's bucket,
-- with the bucket's expiry bookkeeping in the same HSET.
local function write_bucket(keys, args, values, counters, writes, ttl, now)
  local bucket, prefix = keys[1], args[DECIDE_ARG_FIELD_PREFIX]
  local bucket_until =
    keep_until(bucket, prefix, math.ceil((now + ttl) / 1000000), values[counters + CLIENT_EXPIRY], writes)
  redis.call('HSET', bucket, unpack(writes))
  if bucket_until then expire_bucket(bucket, bucket_until, now) end
  maybe_sweep(bucket, now)
end

-- Add an admission's entries to its sliding logs and leases (`pending`, from check_windows).
local function commit_own_keys(pending, now, request_id)
  for _, p in ipairs(pending) do
    if p.code == SLIDING_WINDOW_LOG then
      log_commit(p.key, p.window, p.weight, p.at or now, p.count, now)
    else
      lease_commit(p.key, p.window, now, request_id)
    end
  end
end

-- Commit an admission: every window is consumed (sliding logs and leases,
-- then one HSET of the others' new state and any refused shadow budget's alert).
local function commit_admission(keys, args, values, counters, now, writes, ttl, pending, alerts)
  if pending then commit_own_keys(pending, now, args[DECIDE_ARG_REQUEST_ID]) end
  if alerts then ttl = add_alerts(writes, ttl, alerts) end
  if #writes > 0 then write_bucket(keys, args, values, counters, writes, ttl, now) end
end

-- Commit a refusal: it consumes nothing, but budgets' 100 % alerts are kept,
-- and a refusal for abuse (not for load shedding: the reply's flags are still
-- 0) counts toward a ban.
local function commit_refusal(keys, args, values, counters, now, alerts, reply, policy)
  local writes, ttl = {}, 0
  if alerts then ttl = add_alerts(writes, ttl, alerts) end
  if policy ~= '' and reply[REPLY_FLAGS] == 0 then
    ttl = note_ban_refusal(args[DECIDE_ARG_FIELD_PREFIX], policy, values[counters + REFUSALS], values[counters + BAN],
      now, writes, ttl, reply)
  end
  if #writes > 0 then write_bucket(keys, args, values, counters, writes, ttl, now) end
end

-- Count the decision the reply holds in the usage hash (`usage`, `at`,
-- `days`: count_usage's first three arguments): allowed, with its weight
-- beyond one and its cost, or why it was refused; and a shadow window's refusal.
local function count_decision(usage, at, days, reply, budget_denied, would_deny, unit_weight, cost)
  if reply[REPLY_ALLOWED] == 1 then
    count_usage(at, days, usage, COUNTER.ALLOWED, 1, COUNTER.EXTRA_WEIGHT, unit_weight - 1, COUNTER.COST, cost)
  elseif budget_denied then
    count_usage(at, days, usage, COUNTER.DENIED_BUDGET, 1)
  elseif reply[REPLY_FLAGS] == FLAG_REDUCED_ONLY then
    count_usage(at, days, usage, COUNTER.DENIED_CAPACITY, 1)
  else
    count_usage(at, days, usage, COUNTER.DENIED_RATE, 1)
  end
  if would_deny then count_usage(at, days, usage, COUNTER.SHADOW_WOULD_DENY, 1) end
end

-- An allowance's size, in requests: at most `wanted`, and as many as leave
-- every window at least (1 - `share`) of the units it had left after this
-- request (`reply`, from check_windows at one request), so other processes
-- are not refused early. 1 (no allowance) with a lease or a shadow window,
-- which must see each request.
local function allowance_size(args, reply, request_weight, cost, wanted, share)
  local size = wanted
  for i = 1, #args - DECIDE_FIXED_ARGS do
    local code, _, _, _, own_weight, _, shadow = struct.unpack(SPEC_NUMBERS, args[DECIDE_FIXED_ARGS + i])
    if code == CONCURRENCY or shadow == 1 then return 1 end
    local units = window_weight(code, own_weight, request_weight, cost)
    if units > 0 then
      local left = reply[REPLY_HEAD + (i - 1) * REPLY_PER_WINDOW + WINDOW_REPLY_REMAINING]
      size = math.min(size, 1 + math.floor(share * math.max(left, 0) / units))
    end
  end
  return size
end

-- Check every window at one request, then, for an allowance that fits, at
-- `size` requests. -> check_windows' results (and `reply`, `writes`) of the
-- check that stands: the allowance's when it fits, else the request's.
local function check_request(keys, args, fields, values, now, weight, cost, multiplier, mode)
  local reply, writes = reply_head(1, now, #args > DECIDE_FIXED_ARGS), {nil, nil}  -- a window's field and value
  local allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts =
    check_windows(keys, args, fields, values, now, weight, cost, multiplier, writes, reply, 1, nil)
  local allowance = args[DECIDE_ARG_ALLOWANCE]  -- "<requests> <share> <end us>", or ""
  if not allowed or allowance == '' or mode ~= '' then
    return reply, writes, allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts
  end
  local wanted, share, end_us = string.match(allowance, '^(%S+) (%S+) (%S+)$')
  wanted = tonumber(wanted)
  if wanted < 2 then
    return reply, writes, allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts
  end
  local size = allowance_size(args, reply, weight, cost, wanted, tonumber(share))
  if size < 2 then return reply, writes, allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts end
  local big_reply, big_writes = reply_head(1, now, true), {}
  local log_at = now + tonumber(end_us)
  local fits, b_denied, b_would, b_unit, b_ttl, b_pending, b_alerts =
    check_windows(keys, args, fields, values, now, weight, cost, multiplier, big_writes, big_reply, size, log_at)
  if not fits then return reply, writes, allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts end
  big_reply[REPLY_GRANTED] = size
  return big_reply, big_writes, fits, b_denied, b_would, b_unit, b_ttl, b_pending, b_alerts
end

-- parse -> (ACL modes: count only) -> read -> the ban, then every window
-- -> (peek: reply) -> commit -> count.
local function decide(keys, args)
  local now, weight, cost, multiplier, mode, ban_policy = parse_arguments(args)
  local usage, usage_at, usage_days = parse_usage(keys, args, now)
  if mode == 'acl-allow' then
    if usage then count_usage(usage_at, usage_days, usage, COUNTER.ALLOWED, 1, COUNTER.EXTRA_WEIGHT, (weight or 1) - 1, COUNTER.COST, cost) end
    return reply_head(1, now)
  elseif mode == 'acl-deny' then
    if usage then count_usage(usage_at, usage_days, usage, COUNTER.DENIED_ACL, 1) end
    return reply_head(0, now)
  end
  local fields, values, counters = read_state(keys[1], args, args[DECIDE_ARG_FIELD_PREFIX], ban_policy)
  local banned = ban_policy ~= '' and banned_reply(values[counters + BAN], now)
  if banned then
    if usage and mode ~= 'peek' then count_usage(usage_at, usage_days, usage, COUNTER.DENIED_BANNED, 1) end
    return banned
  end
  local reply, writes, allowed, budget_denied, would_deny, unit_weight, ttl, pending, alerts =
    check_request(keys, args, fields, values, now, weight, cost, multiplier, mode)
  if not allowed then
    reply[REPLY_ALLOWED] = 0
    if multiplier < 1 and passes_at_full_capacity(keys, args, values, now, weight, cost) then
      reply[REPLY_FLAGS] = FLAG_REDUCED_ONLY
    end
  end
  if mode == 'peek' then return reply end
  if allowed then
    commit_admission(keys, args, values, counters, now, writes, ttl, pending, alerts)
  else
    commit_refusal(keys, args, values, counters, now, alerts, reply, ban_policy)
  end
  if usage then count_decision(usage, usage_at, usage_days, reply, budget_denied, would_deny, unit_weight, cost) end
  return reply
end
