-- Usage counters: one hash per bucket of clients and usage day (a day where
-- budget days begin, BUDGET_TIME_ZONE), cumulative
-- totals only (HINCRBY), so a reader can copy them anywhere any number of
-- times. Fields: "<client>|<plan>|<scope>|<counter>" with counters a (allowed), dr / db
-- (denied by rate / budget), dc (denied by reduced capacity), sw (shadow would
-- deny), wx (weight beyond one unit per admitted request: weight - 1, so that
-- the common one-unit request costs one HINCRBY, not two), c (cost).
-- USAGE_TTL_DAYS comes from quotas/contract/protocol.py (generated at the top of the script).

local function civil_date(days)
  -- Days since 1970-01-01 -> YYYYMMDD (H. Hinnant's civil_from_days).
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp + 3
  if mp >= 10 then m = mp - 9 end
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d%02d%02d', y, m, d)
end

-- The bucket's usage hash of the day containing `now`, and that day's index.
-- The application sends the key of the day its own clock says (`day_key`,
-- ending in ":<YYYYMMDD>") with that day's index (`hint_days`) and the time
-- zone's UTC offset then (`offset`, seconds); the date is computed here only
-- when the server's clock says otherwise, near midnight.
local function usage_key(day_key, hint_days, now, offset)
  local days = math.floor((now + (offset or 0) * 1000000) / 86400000000)
  if days == hint_days then return day_key, days end
  return string.sub(day_key, 1, -9) .. civil_date(days), days
end

-- Each hash also holds its generation, GENERATION_FIELD = "<server time us>",
-- written when the hash is created: a hash created again after Redis lost its
-- data has another, so the flush adds the new counts to what it had already
-- copied instead of mistaking them for the old totals (usage/flush.py).
local GENERATION_FIELD = '~g'

-- After `fresh` fields were created in hash `key` of day `days`: if they are
-- all it holds, the hash is new and starts a generation. Either way it
-- outlives its day by USAGE_TTL_DAYS: the day is a date where budget days
-- begin, so it is taken to end as late as it can anywhere (UTC-12, the
-- westernmost zone).
local function usage_created(key, days, fresh)
  if redis.call('HLEN', key) == fresh then
    local t = redis.call('TIME')
    redis.call('HSET', key, GENERATION_FIELD, t[1] .. string.format('%06d', tonumber(t[2])))
  end
  redis.call('PEXPIREAT', key, (days + 1 + USAGE_TTL_DAYS) * 86400000 + 43200000)
end

-- Add up to three counters ("<prefix>|<name>" += amount; zero amounts are
-- skipped) to usage hash `key` of day `days`.
local function count_usage(key, days, prefix, n1, a1, n2, a2, n3, a3)
  -- HINCRBY answering the amount itself means the field was just created
  -- (or held 0): only then can the hash be new.
  local fresh = 0
  if a1 ~= 0 and redis.call('HINCRBY', key, prefix .. '|' .. n1, a1) == a1 then fresh = fresh + 1 end
  if n2 and a2 ~= 0 and redis.call('HINCRBY', key, prefix .. '|' .. n2, a2) == a2 then fresh = fresh + 1 end
  if n3 and a3 ~= 0 and redis.call('HINCRBY', key, prefix .. '|' .. n3, a3) == a3 then fresh = fresh + 1 end
  if fresh > 0 then usage_created(key, days, fresh) end
end
