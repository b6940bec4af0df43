-- End the leases of one request: KEYS are its concurrency sets, ARGV[1] its id.
local released = 0
for i = 1, #KEYS do released = released + redis.call('ZREM', KEYS[i], ARGV[1]) end
return released
