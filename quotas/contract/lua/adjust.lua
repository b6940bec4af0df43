-- adjust(keys, args): reconcile a decision's estimated cost with the actual cost, after the view
-- ran: add `delta` (actual - estimate, may be negative) to each budget the
-- decision spent from, if that budget is still in the same period (a state
-- still naming the previous period is not a later one's: the delta starts the
-- decision's), and to the day's usage. Returns {used, alert mask} per budget window
-- (quotas.contract.protocol.AdjustedBudget; used is -1 when the period has ended).
--
-- keys[1]  the client's bucket hash; keys[2] the bucket's usage key of the decision's day
-- args: the slots of quotas.contract.protocol.AdjustArg (ADJUST_ARG_*): the decision's
-- time (us), delta (micro-units), the usage field prefix as for decide.lua (or
-- ''), the client's field prefix "<client>|", the day of keys[2]; then args[ADJUST_FIXED_ARGS + i],
-- budget window i's spec, as sent with the decision.
local function adjust(keys, args)
  local dnow = tonumber(args[ADJUST_ARG_NOW])
  local delta = tonumber(args[ADJUST_ARG_DELTA])
  local usage = args[ADJUST_ARG_USAGE]
  local cp = args[ADJUST_ARG_FIELD_PREFIX]
  local reply = {}
  for i = 1, #args - ADJUST_FIXED_ARGS do
    local w = parse_spec(args[ADJUST_FIXED_ARGS + i])
    local field = cp .. w.field
    local pend, span = period_of(w.start, w.stop, w.next_stop, dnow)
    local raw = redis.call('HGET', keys[1], field)
    local named, used, level = parse_period_state(raw, pend, span)
    local mask = 0
    if named ~= pend then
      -- A later period began after the decision: its state is not ours to change.
      used = -1
    elseif used > 0 or delta > 0 then
      used = math.max(0, used + delta)
      local new_level = math.max(level, alert_level(used, w.limit))
      mask = crossed(level, new_level)
      redis.call('HSET', keys[1], field, string.format('%d:%d:%d', pend, used, new_level))
    end
    reply[#reply + 1] = used
    reply[#reply + 1] = mask
  end
  if usage ~= '' and delta ~= 0 then
    -- The usage field of the client, as decide.lua counted it: in the decision's day.
    count_usage(keys[2], tonumber(args[ADJUST_ARG_DAY]), cp .. usage, COUNTER.COST, delta)
  end
  return reply
end
