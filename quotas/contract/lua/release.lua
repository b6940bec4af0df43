-- release(keys, args): end the leases of one request: keys are its concurrency sets,
-- args[RELEASE_ARG_REQUEST_ID] its id (quotas.contract.protocol.ReleaseArg).
local function release(keys, args)
  local released = 0
  for i = 1, #keys do released = released + redis.call('ZREM', keys[i], args[RELEASE_ARG_REQUEST_ID]) end
  return released
end
