-- refund(keys, args): give back what one admitted decision consumed (used when a view ended in a
-- server error and the limit asks for refunds). Best effort by design: a
-- window that has moved on since the decision has nothing left to refund.
--
-- keys[1] the client's bucket hash, keys[2] unused (usage base), keys[3+] sliding logs
-- args: the slots of quotas.contract.protocol.RefundArg (REFUND_ARG_*): the decision's
-- time (us), its weight override or '', the client's field prefix "<client>|",
-- how many requests' units to give back ('' for one: an allowance gives back
-- its unused part), when a sliding log recorded them ('' for the decision's
-- time: an allowance records them at its end) and the alert thresholds the
-- decision reached and has not reported (one digit, a mask, per window: '' for
-- none); then args[REFUND_FIXED_ARGS + i], the spec of window i.
-- A period quota's state is read as decide read it (parse_period_state with its
-- carry-over: a state under another BUDGET_TIME_ZONE's end is still the
-- decision's period). The alert level the decision raised goes back with its
-- units, as if the admission never happened: levels follow committed spend, and
-- its thresholds were never reported (the caller drops them), so the level
-- returns to what it was before it and the request that really reaches them
-- reports them. Only an unreported level is lowered: a decision whose alert
-- went out has mask 0 (each threshold is sent once per limit and period, so the
-- level stands). A level another request raised further since also stands: it
-- reported the thresholds above ours, which lowering would send again (ours then
-- goes unsent: a race of two requests in flight at a threshold). Spend
-- others committed since that still reaches our threshold reports it at the
-- next request's decision (crossed from the level before): late, never twice.
-- Concurrency leases (9) are not refunds' business: release.lua ends them.
-- Budgets (BUDGET) are not refunded here: their estimate is released by adjust.lua.
local function refund(keys, args)
  local dnow = tonumber(args[REFUND_ARG_NOW])
  local weight_override = tonumber(args[REFUND_ARG_WEIGHT])
  local cp = args[REFUND_ARG_FIELD_PREFIX]
  local times = tonumber(args[REFUND_ARG_TIMES]) or 1
  local log_at = tonumber(args[REFUND_ARG_LOG_AT]) or dnow
  local own_masks = args[REFUND_ARG_OWN]
  local next_key = 3
  for i = 1, #args - REFUND_FIXED_ARGS do
    local w = parse_spec(args[REFUND_FIXED_ARGS + i])
    local code, limit, window = w.code, w.limit, w.window  -- window: nil for periods
    local field = cp .. w.field
    local weight = weight_override or w.weight
    if code == PERIOD_REQUESTS then weight = 1 end
    weight = weight * times
    if code == CONCURRENCY then
      next_key = next_key + 1
    elseif code == SLIDING_WINDOW_LOG then
      local key = keys[next_key]
      next_key = next_key + 1
      local members = redis.call('ZRANGEBYSCORE', key, log_at, log_at, 'LIMIT', 0, weight)
      if #members > 0 then redis.call('ZREM', key, unpack(members)) end
    else
      local raw = redis.call('HGET', keys[1], field)
      local value = nil
      if raw and code == FIXED_WINDOW then
        local idx, c = string.match(raw, '^(%d+):(%d+)$')
        if idx and tonumber(idx) == math.floor(dnow / window) then
          value = idx .. ':' .. fmt(math.max(0, tonumber(c) - weight))
        end
      elseif raw and code == SLIDING_WINDOW_COUNTER then
        local idx, p, c = string.match(raw, '^(%d+):(%d+):(%d+)$')
        if idx then
          local didx = math.floor(dnow / window)
          p, c = tonumber(p), tonumber(c)
          if tonumber(idx) == didx then c = math.max(0, c - weight) end
          if tonumber(idx) == didx + 1 then p = math.max(0, p - weight) end
          value = idx .. ':' .. fmt(p) .. ':' .. fmt(c)
        end
      elseif raw and (code == PERIOD_QUOTA or code == PERIOD_REQUESTS) then
        local pend, span = period_of(w.start, w.stop, w.next_stop, dnow)
        local named, used, level, reserved, levels = parse_period_state(raw, pend, span, w.limit)
        -- Only the decision's own period gives units back: a later one's are not this request's (levels.lua).
        if used > 0 and not later_period(named, pend, span) then
          local before, raised_to = raised_by(tonumber(string.sub(own_masks, i, i)) or 0, level)
          if level <= raised_to then level = before end
          value = period_state(named, math.max(0, used - weight), level, reserved, w.limit, levels)
        end
      elseif raw and (code == TOKEN_BUCKET or code == LEAKY_BUCKET) then
        -- A TAT in the past simply means a full bucket, so no clamping is needed.
        value = pack_tat(unpack_tat(raw) - weight * window / limit)
      end
      if value then redis.call('HSET', keys[1], field, value) end
    end
  end
  return 1
end
