-- Buckets: many clients share one hash (see quotas/contract/keys.py for why). Redis
-- expires keys, not fields, so the bucket keeps expiries itself:
--   '<client>|~'  epoch seconds after which every field of that client is dead
--   '~'           epoch seconds until which the bucket key must live
-- Both are only ever raised, with some headroom so that a busy client rewrites
-- them about once a minute, not on every request. Dead clients' fields are
-- removed by an occasional sweep of the whole bucket; a bucket nobody writes
-- to expires as a whole.
local EXPIRY_HEADROOM = 60   -- seconds added whenever an expiry is raised
local SWEEP_ODDS = 64        -- about one write in this many sweeps its bucket...
local SWEEP_FIELDS = 256     -- ...if it has at most this many fields; larger ones less often

-- Raise the client's and the bucket's expiry so that both outlive `need_s`.
-- `client_exp` is the client's current value (from HMGET, or false); the
-- bucket's is read here, only when the client's must be raised; `writes` is
-- the HSET argument list to extend. Returns the bucket's new expiry (epoch
-- seconds) when the key's TTL must be raised after the HSET, else nil.
local function keep_until(bucket, cp, need_s, client_exp, writes)
  -- (`client_exp + 0`: Lua's arithmetic converts the string, at half of what tonumber() costs.)
  if client_exp and need_s <= client_exp + 0 then return nil end
  local until_s = need_s + EXPIRY_HEADROOM
  writes[#writes + 1] = cp .. '~'
  writes[#writes + 1] = until_s
  if until_s <= (tonumber(redis.call('HGET', bucket, '~')) or 0) then return nil end
  -- The bucket outlives its longest-lived client by one more headroom.
  local bucket_until = until_s + EXPIRY_HEADROOM
  writes[#writes + 1] = '~'
  writes[#writes + 1] = bucket_until
  return bucket_until
end

-- Set the bucket's TTL to end at `until_s` on the script's clock (relative,
-- so that a decision at an explicit past time in tests does not delete it).
local function expire_bucket(bucket, until_s, now)
  redis.call('PEXPIRE', bucket, until_s * 1000 - math.floor(now / 1000))
end

-- Remove every field of the bucket's dead clients. Returns the fields removed.
local function sweep(bucket, now_s)
  local all = redis.call('HGETALL', bucket)
  local dead, any = {}, false
  for i = 1, #all, 2 do
    local f = all[i]
    -- '<client>|~' fields end in "|~" (124, 126); the bucket's own '~' has no '|'.
    if #f > 2 and string.byte(f, -1) == 126 and string.byte(f, -2) == 124 and tonumber(all[i + 1]) < now_s then
      dead[string.sub(f, 1, -2)] = true
      any = true
    end
  end
  if not any then return 0 end
  local doomed = {}
  for i = 1, #all, 2 do
    local f = all[i]
    local bar = string.find(f, '|', 1, true)
    if bar and dead[string.sub(f, 1, bar)] then doomed[#doomed + 1] = f end
  end
  for i = 1, #doomed, 4000 do
    redis.call('HDEL', bucket, unpack(doomed, i, math.min(i + 3999, #doomed)))
  end
  return #doomed
end

-- Called after every write: sweeps on about one in SWEEP_ODDS (the low bits of
-- the microsecond clock decide). A sweep reads the whole bucket, so a bucket
-- over SWEEP_FIELDS fields (KEY_BUCKETS set low for the number of clients) is
-- swept proportionally less often: the cost per write stays bounded, and so
-- does the share of dead fields.
local function maybe_sweep(bucket, now)
  if now % SWEEP_ODDS ~= 0 then return end
  local size = redis.call('HLEN', bucket)
  if size > SWEEP_FIELDS and math.floor(now / SWEEP_ODDS) % math.ceil(size / SWEEP_FIELDS) ~= 0 then return end
  sweep(bucket, math.floor(now / 1000000))
end
