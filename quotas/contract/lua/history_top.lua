-- history_top(keys, args): add clients' counts to one hour's top-client set, then keep its largest.
--
-- keys[1]  the sorted set of one hour and side (quotas.store.history_store.top_key)
-- args, by the slot names of quotas.contract.protocol.HistoryTopArg (HISTORY_TOP_ARG_*):
--   KEEP        how many members to keep (the highest scores)
--   EXPIRES_AT  when the set expires (epoch seconds)
-- then member, count pairs from args[HISTORY_TOP_FIXED_ARGS + 1]
-- One command for a process's whole batch, where a ZINCRBY each through redis-py's pipeline cost the
-- process about 43,000 more instructions per new client (make bench-count: a cold decision's own
-- instructions went from 429,659 to 386,675).
local function history_top(keys, args)
  for i = HISTORY_TOP_FIXED_ARGS + 1, #args, 2 do
    redis.call('ZINCRBY', keys[1], args[i + 1], args[i])
  end
  redis.call('ZREMRANGEBYRANK', keys[1], 0, -(tonumber(args[HISTORY_TOP_ARG_KEEP]) + 1))
  redis.call('EXPIREAT', keys[1], args[HISTORY_TOP_ARG_EXPIRES_AT])
  return 1
end
