-- admit.lua: may one more request go, and (with a cost) reserve it.
-- Checks every window of every subject in KEYS (one Redis Cluster slot) in
-- one atomic step; with a cost, reserves it in all of them or in none.
--
-- KEYS[k]    subject k (see package cachekey): atrl:{rule|type|source|value}
-- ARGV[1]    the time in seconds; empty in production, where Redis's own clock is used
-- ARGV[2]    tokens to reserve: 0 checks only ("used < limit", nothing written);
--            more admits only when "used + cost <= limit" in every window
-- ARGV[3..]  per subject, in KEYS order: n, then n pairs (window seconds, limit)
-- Reply: {allowed 1|0, limit, remaining, reset seconds, now} where the first four
--   describe the window that decides (rejected: the closed window that resets
--   last; allowed: the window with the fewest tokens left, ties to the later
--   reset), remaining counts this request's reservation, and now is the time
--   the buckets were taken at, for reconciling into the same buckets later.

local now = tonumber(ARGV[1]) or tonumber(redis.call('TIME')[1]) -- one clock for every gateway replica
local cost = tonumber(ARGV[2])
local verdict                                                   -- {allowed, limit, remaining, reset}
local counters = {}                                             -- {key, ttl} of each window, to reserve in
local a = 3                                                     -- next ARGV to read
for k = 1, #KEYS do
  for _ = 1, tonumber(ARGV[a]) do                               -- this subject's windows
    local window, limit = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 2
    local bucket = math.floor(now / window)                     -- windows are aligned to the epoch
    local key = KEYS[k] .. ':t' .. window .. ':' .. bucket
    local left = limit - (tonumber(redis.call('GET', key)) or 0) - cost -- what this request would leave
    local reset = (bucket + 1) * window - now                   -- seconds until the next bucket
    local open = (left > 0 or (cost > 0 and left == 0)) and 1 or 0 -- check: room left; reserve: room for all of it
    if verdict == nil                                           -- the first window decides until a better one
      or (open == 0 and (verdict[1] == 1 or reset > verdict[4])) -- a closed window beats any open one
      or (open == 1 and verdict[1] == 1                         -- among open windows, the tightest
          and (left < verdict[3] or (left == verdict[3] and reset > verdict[4]))) then
      verdict = {open, limit, math.max(left, 0), reset}
    end
    counters[#counters + 1] = {key, reset + 1}                  -- +1 s: no clock rounding drops it early
  end
  a = a + 1                                                     -- past this subject's window count
end
if verdict[1] == 1 and cost > 0 then                            -- admitted: reserve everywhere
  for _, c in ipairs(counters) do
    redis.call('INCRBY', c[1], cost)
    if redis.call('TTL', c[1]) < 0 then redis.call('EXPIRE', c[1], c[2]) end -- a new bucket lives until its window ends
  end
end
verdict[5] = now
return verdict
