-- renew.lua: extend a long request's concurrency leases while it streams,
-- so that they outlive it only when its gateway is gone.
--
-- KEYS[k]    subject k holding a lease (see package cachekey)
-- ARGV[1]    the time in seconds; empty in production, for Redis's clock; the
--            prelude (scripts.go) reads it into now, the clock admissions sweep by
-- ARGV[2]    '<lease seconds>:<lease id>'
-- Reply: how many leases were extended (a lease already swept stays gone:
--   its slot may have been given to another request).

local lease, id = string.match(ARGV[2], '^(%d+):(.+)$')
local renewed = 0
for k = 1, #KEYS do
  local set = KEYS[k] .. ':c'
  renewed = renewed + redis.call('ZADD', set, 'XX', 'CH', now + tonumber(lease), id) -- only a lease still held
  redis.call('EXPIRE', set, tonumber(lease) + 1)                -- the set outlives its newest lease
end
return renewed
