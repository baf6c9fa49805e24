-- alerts.lua: budget alerts (config.Alerts), for admit.lua and charge.lua.
-- A call that alerts ends its options argument (ARGV[3]) with '#', then 'o'
-- when a charge is to read the subjects' overrides (overrides.lua), then
-- the thresholds, percentages of a limit ('#50,80,100'), and gives each
-- window's limit. A bucket that goes past a threshold is marked, once for
-- every replica, and the call reports it in its reply (see the scripts).

local thresholds = {}                                           -- the percentages that alert, ascending ({}: none)

-- read_thresholds takes the alerts' suffix off the options, leaving them
-- as a call without alerts has them, and reports whether there was one and
-- whether it asks for overrides.
local function read_thresholds()
  local o, list = string.match(ARGV[3], '#(o?)([%d,]+)$')
  if not list then return false, false end
  ARGV[3] = string.sub(ARGV[3], 1, -(#o + #list + 2))           -- without '#', 'o' and the list
  for pct in string.gmatch(list, '%d+') do thresholds[#thresholds + 1] = tonumber(pct) end
  return true, o == 'o'
end

-- point is the least count that reaches pct% of limit, exactly: limit (up
-- to 2^53) is split at a multiple of 100, so that no product passes 2^53.
local function point(pct, limit)
  local r = math.fmod(limit, 100)                               -- exact, unlike %, for any double
  return pct * ((limit - r) / 100) + math.ceil(pct * r / 100)
end

-- cross appends to out, for every threshold a bucket (key) went past from
-- before to after, of limit, {subject, window, threshold, used, limit,
-- reset}, subject and window being indexes from 1 in ARGV order, when it is
-- the first to: a marker beside the bucket, living as long (ttl), says so.
local function cross(out, key, before, after, limit, ttl, subject, window, reset)
  for _, pct in ipairs(thresholds) do
    local p = point(pct, limit)
    if before < p and p <= after and redis.call('SET', key .. ':!' .. pct, 1, 'NX', 'EX', ttl) then
      for _, x in ipairs({subject, window, pct, after, limit, reset}) do out[#out + 1] = x end
    end
  end
end
