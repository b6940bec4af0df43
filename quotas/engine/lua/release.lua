-- End the leases of one request: KEYS are its concurrency sets,
-- ARGV[RELEASE_ARG_REQUEST_ID] its id (quotas.engine.protocol.ReleaseArg).
local released = 0
for i = 1, #KEYS do released = released + redis.call('ZREM', KEYS[i], ARGV[RELEASE_ARG_REQUEST_ID]) end
return released
