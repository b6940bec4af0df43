-- usage_add(keys, args): add usage counted in-process (the local fallback, refusals answered from
-- memory, a replayed spool file) to one usage hash, exactly once per batch.
--
-- keys[1]  the usage hash of one bucket and day
-- args, by the slot names of quotas.contract.protocol.UsageAddArg (USAGE_ADD_ARG_*):
--   DAY     that day, in days since 1970
--   WRITER  the writer's id (one per process)
--   SEQ     the batch's sequence number: the hash remembers, in field
--           "~w:<writer>", the last batch of each writer it took, so a batch
--           written again after a failure that hid whether it arrived (or
--           replayed from a spool file twice) is skipped. A writer sends its
--           batches in order and never sends batch n + 1 to any hash before
--           batch n is in every hash.
-- then field, amount pairs from args[USAGE_ADD_FIXED_ARGS + 1]
-- Returns 1 when the batch was added (or its day is past retention: nothing to add it to), 0 when this
-- hash already had it.
local function usage_add(keys, args)
  local days = tonumber(args[USAGE_ADD_ARG_DAY])
  local mark = '~w:' .. args[USAGE_ADD_ARG_WRITER]
  local seq = tonumber(args[USAGE_ADD_ARG_SEQ])
  local last = tonumber(redis.call('HGET', keys[1], mark) or '-1')
  if last >= seq then return 0 end
  local fresh = 0
  for i = USAGE_ADD_FIXED_ARGS + 1, #args, 2 do
    local amount = tonumber(args[i + 1])
    if amount ~= 0 and redis.call('HINCRBY', keys[1], args[i], amount) == amount then fresh = fresh + 1 end
  end
  if fresh > 0 then usage_created(keys[1], days, fresh) end
  -- A day past its retention: usage_created's PEXPIREAT, already past, deleted the hash, and its counts with it
  -- (as the hash's own expiry would have). The mark would make the hash again with no expiry: a key for ever.
  if redis.call('EXISTS', keys[1]) == 0 then return 1 end
  redis.call('HSET', keys[1], mark, seq)
  return 1
end
