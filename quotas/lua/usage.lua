-- Usage counters: one hash per client and UTC day, cumulative totals only
-- (HINCRBY), so a reader can copy them anywhere any number of times.
-- Fields: "<plan>|<scope>|<counter>" with counters a (allowed), dr / db
-- (denied by rate / budget), dc (denied by reduced capacity), sw (shadow would
-- deny), w (weight), c (cost).
local USAGE_TTL_DAYS = 3

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

-- Add `counts` ({counter = amount, ...}) for `prefix` to the client's
-- usage hash of the day containing `now`.
local function count_usage(base_key, prefix, now, counts)
  local days = math.floor(now / 86400000000)
  local key = base_key .. ':' .. civil_date(days)
  local fresh = false
  for counter, amount in pairs(counts) do
    if amount ~= 0 and redis.call('HINCRBY', key, prefix .. '|' .. counter, amount) == amount then
      fresh = true
    end
  end
  -- A new field may mean a new key: make sure it outlives the day by USAGE_TTL_DAYS.
  if fresh then redis.call('PEXPIREAT', key, (days + 1 + USAGE_TTL_DAYS) * 86400000) end
end
