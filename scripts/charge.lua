-- charge.lua: add the tokens one response used to every window of its subject.
-- The whole amount is added even past the limit: the next admission sees the overshoot.
--
-- KEYS[1]   the subject (see package cachekey): atrl:{rule|type|source|value}
-- ARGV[1]   the time in seconds; empty in production, where Redis's own clock is used
-- ARGV[2]   the tokens to add (a positive integer)
-- ARGV[3..] the window lengths in seconds
-- Reply: the new total of each window, in the order given.

local now = tonumber(ARGV[1]) or tonumber(redis.call('TIME')[1]) -- same clock as admit.lua
local tokens = tonumber(ARGV[2])
local totals = {}
for i = 3, #ARGV do
  local window = tonumber(ARGV[i])                              -- window length in seconds
  local bucket = math.floor(now / window)                       -- the bucket current now
  local key = KEYS[1] .. ':t' .. window .. ':' .. bucket        -- same slot as KEYS[1]: the hash tag is shared
  totals[#totals + 1] = redis.call('INCRBY', key, tokens)
  if redis.call('TTL', key) < 0 then                            -- new bucket: it lives until its window ends
    redis.call('EXPIRE', key, (bucket + 1) * window - now + 1)  -- (+1 s so no clock rounding drops it early)
  end
end
return totals
