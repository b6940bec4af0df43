-- Escalation: a client refused more than `threshold` times within `window`
-- is banned for a cooling-off period that grows with each ban (the policy's
-- durations, the last one repeating); strikes are forgotten a day after the
-- last ban. State, in the client's hash:
--   '!dn' = "<window index>:<refusals>", '!bn' = "<until>:<strikes>:<strikes kept until>"
local STRIKE_MEMORY = 86400000000

local function parse_ban_policy(text)
  local threshold, window, rest = string.match(text, '^(%d+) (%d+) ([%d,]+)$')
  local durations = {}
  for d in string.gmatch(rest, '%d+') do durations[#durations + 1] = tonumber(d) end
  return tonumber(threshold), tonumber(window), durations
end

local function parse_ban(raw, now)
  -- -> until, strikes (strikes already forgotten count as 0)
  if not raw then return 0, 0 end
  local u, s, keep = string.match(raw, '^(%d+):(%d+):(%d+)$')
  if not u then return 0, 0 end
  if tonumber(keep) <= now then return tonumber(u), 0 end
  return tonumber(u), tonumber(s)
end

-- Count one refusal; returns the '!dn' and '!bn' values to store and the
-- new ban's end (or nil when this refusal does not ban).
local function note_refusal(policy, raw_dn, raw_bn, now)
  local threshold, window, durations = parse_ban_policy(policy)
  local idx = math.floor(now / window)
  local count = 0
  if raw_dn then
    local i, c = string.match(raw_dn, '^(%d+):(%d+)$')
    if i and tonumber(i) == idx then count = tonumber(c) end
  end
  count = count + 1
  if count <= threshold then return string.format('%d:%d', idx, count), nil, nil end
  local _, strikes = parse_ban(raw_bn, now)
  strikes = strikes + 1
  local until_ = now + durations[math.min(strikes, #durations)]
  return string.format('%d:%d', idx, 0), string.format('%d:%d:%d', until_, strikes, until_ + STRIKE_MEMORY), until_
end
