-- admit.lua: may one more request of this subject go through?
-- Every window is checked in this one call; nothing is written.
--
-- KEYS[1]            the subject (see package cachekey): atrl:{rule|type|source|value}
-- ARGV[1]            the time in seconds; empty in production, where Redis's own clock is used
-- ARGV[2k], [2k+1]   window k: its length in seconds, its token limit
-- Reply: {allowed 1|0, limit, remaining, reset seconds} of the window that decides:
--   rejected: the used-up window that resets last (the client may retry after it);
--   allowed:  the window with the fewest tokens left (ties: the one resetting last).

local now = tonumber(ARGV[1]) or tonumber(redis.call('TIME')[1]) -- one clock for every gateway replica
local verdict                                                   -- {allowed, limit, remaining, reset}
for i = 2, #ARGV, 2 do
  local window = tonumber(ARGV[i])                              -- window length in seconds
  local limit = tonumber(ARGV[i + 1])                           -- tokens allowed in one window
  local bucket = math.floor(now / window)                       -- windows are aligned to the epoch
  local used = tonumber(redis.call('GET', KEYS[1] .. ':t' .. window .. ':' .. bucket)) or 0
  local left = limit - used                                     -- negative once a response overshot
  local reset = (bucket + 1) * window - now                     -- seconds until this window's next bucket
  local open = left > 0 and 1 or 0                              -- a used-up window rejects
  if verdict == nil                                             -- the first window decides until a better one
    or (open == 0 and (verdict[1] == 1 or reset > verdict[4]))  -- a used-up window beats any open one
    or (open == 1 and verdict[1] == 1                           -- among open windows, the tightest
        and (left < verdict[3] or (left == verdict[3] and reset > verdict[4]))) then
    verdict = {open, limit, math.max(left, 0), reset}
  end
end
return verdict
