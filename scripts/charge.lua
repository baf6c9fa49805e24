-- charge.lua: add tokens to every window of every subject in KEYS (one slot).
-- Charges the usage a response reported, reconciles a reservation (the
-- difference between usage and reservation, possibly negative), or rolls one
-- back. Whole amounts are added even past the limit: the next admission sees it.
--
-- KEYS[k]    subject k (see package cachekey)
-- ARGV[1]    the time whose buckets are charged, in seconds: the admission time when
--            reconciling a reservation; empty for now (Redis's clock)
-- ARGV[2]    tokens to add (negative: give back)
-- ARGV[3..]  per subject, in KEYS order: n, then its n window lengths in seconds
-- Reply: the new total of each window, in the order given.

local clock = tonumber(redis.call('TIME')[1])                   -- expiries follow Redis's clock
local at = tonumber(ARGV[1]) or clock
local tokens = tonumber(ARGV[2])
local totals = {}
local a = 3
for k = 1, #KEYS do
  for _ = 1, tonumber(ARGV[a]) do
    local window = tonumber(ARGV[a + 1])
    a = a + 1
    local bucket = math.floor(at / window)                      -- the bucket of that time
    local key = KEYS[k] .. ':t' .. window .. ':' .. bucket      -- same slot as KEYS[k]: the hash tag is shared
    if tokens < 0 and redis.call('EXISTS', key) == 0 then       -- the bucket has expired: nothing to give back
      totals[#totals + 1] = 0
    else
      totals[#totals + 1] = redis.call('INCRBY', key, tokens)
      if redis.call('TTL', key) < 0 then                        -- new bucket: it lives until its window ends
        redis.call('EXPIRE', key, math.max((bucket + 1) * window - clock, 0) + 1)
      end
    end
  end
  a = a + 1
end
return totals
