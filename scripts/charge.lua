-- charge.lua: settle a request in every subject in KEYS (one slot).
-- Adds the usage a response reported to the token windows, reconciles a
-- reservation (the difference between usage and reservation, possibly
-- negative) or rolls an admission back, and releases the request's
-- concurrency leases. Whole amounts are added even past the limit: the next
-- admission sees it.
--
-- KEYS[k]    subject k (see package cachekey)
-- ARGV[1]    the time in seconds; empty in production, for Redis's clock; the
--            prelude (scripts.go) reads it into now, which expiries follow
-- ARGV[2]    the time whose buckets are charged: the admission's when
--            reconciling or rolling back; empty for now
-- ARGV[3]    options: 'f' (fixed windows) or 's' (sliding), then, when the
--            request holds leases, ':<lease id>' to release, then, when the
--            charge may be sent twice, '/<seconds>/<charge id>': its marker
--            lives that long, so a retry whose first try did go through is
--            not counted twice; or, to cancel an admission whose answer was
--            lost with its stream, '!<seconds>/<marker id>' (see admit.lua):
--            the charge undoes it in the buckets it took from if it ran and
--            admitted, and marks it cancelled for that long, so that it takes
--            nothing if it runs later (ARGV[2] is then not read)
-- ARGV[4]    tokens to add to token windows (negative: give back)
-- ARGV[5]    requests to add to request windows (-1 rolls an admission back)
-- ARGV[6..]  per subject, in KEYS order: its window count n, followed by 'c'
--            when it holds a lease; then its n windows, e.g. 't60' (see admit.lua)
-- Reply: the new total of each window, in the order given (0 when untouched);
-- empty when the charge id's marker was there: it had been applied already,
-- and when a cancelled admission had not admitted (or not run).

local cancel_seconds, cancel = string.match(ARGV[3], '!(%d+)/(.+)$')
if cancel then
  cancel = KEYS[1] .. ':a:' .. cancel
  local admitted = tonumber(redis.call('GET', cancel))          -- when it admitted; nil: it did not, or has not run
  redis.call('SET', cancel, 'c', 'EX', cancel_seconds)          -- cancelled: if it runs later, it takes nothing
  if not admitted then return {} end                            -- nothing to undo
  ARGV[2] = admitted                                            -- undo in the buckets it took from
end
local marker_seconds, charge = string.match(ARGV[3], '/(%d+)/([^!]+)$')
if charge and not redis.call('SET', KEYS[1] .. ':x:' .. charge, '1', 'NX', 'EX', marker_seconds) then
  return {}                                                     -- a retry of a charge that went through: done already
end
local at = tonumber(ARGV[2]) or now
local sliding = string.sub(ARGV[3], 1, 1) == 's'
local id = string.match(ARGV[3], '^.:([^/!]+)')                 -- the lease to release, if any
local amounts = {t = tonumber(ARGV[4]), q = tonumber(ARGV[5])}
local totals = {}
local a = 6
for k = 1, #KEYS do
  local n, leased = string.match(ARGV[a], '^(%d+)(c?)$')
  a = a + 1
  for _ = 1, tonumber(n) do
    local spec = ARGV[a]
    a = a + 1
    local amount = amounts[string.sub(spec, 1, 1)]
    local w = tonumber(string.sub(spec, 2))
    local bucket = math.floor(at / w)                           -- the bucket of that time
    local key = KEYS[k] .. ':' .. spec .. ':' .. bucket         -- same slot as KEYS[k]: the hash tag is shared
    if amount == 0 or (amount < 0 and redis.call('EXISTS', key) == 0) then -- nothing to add, or expired: nothing to give back
      totals[#totals + 1] = 0
    else
      local total = redis.call('INCRBY', key, amount)
      if total < 0 then                                         -- gave back more than the bucket holds (its reservation
        total = redis.call('INCRBY', key, -total)               -- went with a Redis restart): back to zero, not below,
      end                                                       -- or the window would admit more than its limit
      totals[#totals + 1] = total
      if redis.call('TTL', key) < 0 then                        -- new bucket: it lives until its window ends,
        local ttl = math.max(math.ceil((bucket + 1) * w - now), 0) + 1 -- and one more when sliding reads it
        if sliding then ttl = ttl + w end
        redis.call('EXPIRE', key, ttl)
      end
    end
  end
  if leased == 'c' and id then redis.call('ZREM', KEYS[k] .. ':c', id) end -- the request is no longer in progress
end
return totals
