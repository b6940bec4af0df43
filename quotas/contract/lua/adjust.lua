-- adjust(keys, args): reconcile a decision's estimated cost with the actual cost, after the view
-- ran: add `delta` (actual - estimate, may be negative) to each budget the
-- decision spent from, if that budget is still in the same period (a state
-- still naming the previous period is not a later one's: the delta starts the
-- decision's), and to the day's usage. Returns {used, alert mask} per budget window
-- (quotas.contract.protocol.AdjustedBudget; used is -1 when the period has ended).
--
-- The thresholds a decision reached are reported once it is settled, with the
-- spend then settled: the mask returned is what this request reports, the
-- thresholds it reached (its own mask, sent back) that its settled spend still
-- reaches, and any the adjustment newly reached. A threshold it reached that
-- the spend fell back below (a refund, an actual cost under the estimate) is
-- taken back: the stored level drops, so the request that really reaches it
-- reports it. Only the level this request raised is lowered: a level another
-- request raised further since then stands (and so does this request's part).
--
-- A settlement is taken once: with a settlement id, keys[3] marks it taken (for
-- SETTLEMENT_MEMORY seconds), and the same settlement sent again (its first
-- reply lost to a timeout, then retried) changes nothing: it is answered with
-- each budget's spend as it stands and the thresholds the first run reported
-- (kept in the mark), which the lost reply never delivered.
--
-- keys[1]  the client's bucket hash; keys[2] the bucket's usage key of the decision's day;
-- keys[3]  the settlement's mark (with a settlement id only)
-- args: the slots of quotas.contract.protocol.AdjustArg (ADJUST_ARG_*): the decision's
-- time (us), delta (micro-units), the usage field prefix as for decide.lua (or
-- ''), the client's field prefix "<client>|", the day of keys[2], the decision's
-- own alert masks (one digit per budget, '' for none), the settlement id (or ''),
-- how long its mark lasts (s); then args[ADJUST_FIXED_ARGS + i], budget window i's
-- spec, as sent with the decision.

local function adjust(keys, args)
  local dnow = tonumber(args[ADJUST_ARG_NOW])
  local delta = tonumber(args[ADJUST_ARG_DELTA])
  local usage = args[ADJUST_ARG_USAGE]
  local cp = args[ADJUST_ARG_FIELD_PREFIX]
  local release = tonumber(args[ADJUST_ARG_RELEASE]) or 0
  local settlement = args[ADJUST_ARG_SETTLEMENT]
  local taken = settlement ~= '' and not redis.call('SET', keys[3], '1', 'NX', 'EX', args[ADJUST_ARG_MEMORY])
  local reported = taken and (redis.call('GET', keys[3]) or '') or ''
  local masks = {}
  local reply = {}
  for i = 1, #args - ADJUST_FIXED_ARGS do
    local w = parse_spec(args[ADJUST_FIXED_ARGS + i])
    local field = cp .. w.field
    local pend, span = period_of(w.start, w.stop, w.next_stop, dnow)
    local raw = redis.call('HGET', keys[1], field)
    local named, used, level, reserved, levels = parse_period_state(raw, pend, span, w.limit)
    local own = tonumber(string.sub(args[ADJUST_ARG_OWN], i, i)) or 0
    local mask = 0
    if later_period(named, pend, span) then
      -- A later period began after the decision: its state is not ours to change (levels.lua).
      used = -1
    elseif taken then
      -- This settlement was taken before: the spend as it stands, nothing changed; the thresholds its first run
      -- reported, again (the caller retries only a reply it never had).
      used = used - reserved
      mask = tonumber(string.sub(reported, i, i)) or 0
    elseif used > 0 or delta > 0 or own > 0 then
      used = math.max(0, used + delta)
      reserved = math.max(0, math.min(used, reserved - release))
      -- Levels follow committed spend: what live allowances still hold in reserve raises none.
      local committed = used - reserved
      local before, raised_to = raised_by(own, level)
      if level > raised_to then
        -- Raised further by another request since: this request's thresholds stand, and are reported.
        mask = own
      else
        level = math.max(before, alert_level(committed, w.limit))
        mask = crossed(before, level)
      end
      redis.call('HSET', keys[1], field, period_state(named, used, level, reserved, w.limit, levels))
      used = committed
    else
      used = used - reserved
    end
    reply[#reply + 1] = used
    reply[#reply + 1] = mask
    masks[#masks + 1] = mask
  end
  if settlement ~= '' and not taken then
    redis.call('SET', keys[3], table.concat(masks), 'XX', 'KEEPTTL')
  end
  if usage ~= '' and delta ~= 0 and not taken then
    -- The usage field of the client, as decide.lua counted it: in the decision's day.
    count_usage(keys[2], tonumber(args[ADJUST_ARG_DAY]), cp .. usage, COUNTER.COST, delta)
  end
  return reply
end
