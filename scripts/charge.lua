-- charge.lua: settle a request in every subject in KEYS (one slot).
-- Adds the usage a response reported to the token windows, reconciles a
-- reservation (the difference between usage and reservation) or rolls an
-- admission back, and releases the request's concurrency leases. What is
-- added goes to the buckets current now, even past the limit: the next
-- admission sees it, however long ago the request was admitted. What is
-- given back (negative) goes to the buckets of the admission, where the
-- reservation went. A bucket holds 0 to 2^53; one brought to 0 is deleted.
--
-- KEYS[b]    the subjects' keys (see package cachekey)
-- ARGV[1]    the time in seconds; empty in production, for Redis's clock; the
--            prelude (scripts.go) reads it into sec + frac = now: what is
--            added goes to its buckets, and expiries follow it
-- ARGV[2]    the admission's time (a Verdict's At), whose buckets what is
--            given back goes to; empty for now
-- ARGV[3]    options: 'f' (fixed windows) or 's' (sliding), then, when the
--            request holds leases, ':<lease id>' to release, then, when the
--            charge may be sent twice, '/<seconds>/<charge id>': its marker
--            lives that long, so a retry whose first try did go through is
--            not counted twice; or, to cancel an admission whose answer was
--            lost with its stream, '!<seconds>/<marker id>' (see admit.lua):
--            the charge undoes it in the buckets it took from if it ran and
--            admitted, and marks it cancelled for that long, so that it takes
--            nothing if it runs later (ARGV[2] is then not read); then, with
--            budget alerts, '=<tokens>:<nanodollars>' when the request had
--            a reservation: the usage it charges (the amounts below are
--            then the difference), on which token and money windows alert,
--            counted beside each bucket in '<bucket>:u' (a reservation is
--            no usage), then '#', 'o' when the subjects' overrides replace
--            their limits, and the thresholds (alerts.lua)
-- ARGV[4]    tokens to add to token windows (negative: give back), then ':'
--            and nanodollars to add to money windows when there are any
--            ("-300" or "-300:-975000")
-- ARGV[5]    requests to add to request windows (-1 rolls an admission back)
-- ARGV[6..]  per subject, in order: its window count n, followed by 'c'
--            when it holds a lease and by a key suffix as in admit.lua; then
--            its n windows, e.g. 't60' (see admit.lua), with alerts each
--            followed by its limit
-- Reply: the new total of each window, in the order given (0 when untouched
-- or deleted); empty when the charge id's marker was there: it had been
-- applied already (or, when that first try took a bucket past a threshold,
-- -1, the time and the crossings it reported, kept in the marker: the
-- retry of a charge whose answer was lost still tells of its alerts), and
-- when a cancelled admission had not admitted (or not run). With alerts, when a bucket went past a threshold, the totals are
-- followed by the time (seconds) and 7 numbers per threshold passed (see
-- alerts.lua: subject, window, threshold, used, limit, reset seconds, bucket).

local alerting, read_overrides = read_thresholds()              -- budget alerts: ARGV[3] loses its suffix
local spent                                                     -- with alerts and a reservation: the usage charged
if alerting then
  local spent_t, spent_u = string.match(ARGV[3], '=(%d+):(%d+)$')
  if spent_t then ARGV[3] = string.gsub(ARGV[3], '=%d+:%d+$', '') end -- (the options as a call without it has them)
  spent = spent_t and {t = tonumber(spent_t), u = tonumber(spent_u), q = 0}
end
local per = alerting and 2 or 1                                 -- arguments per window: with alerts, its limit too
if clock_off() then return redis.error_reply('ATRL_TIME ' .. sec) end -- calendar bounds around another clock (period.lua)
local id = string.find(ARGV[3], ':', 2, true) and string.match(ARGV[3], '^.:([^/!]+)') -- the lease to release, if any
if id then                                                      -- leases first: a full Redis (maxmemory) refuses the
  local a, b, subject = 6, 0, nil                               -- writes below but not ZREM, and a request that ended
  while a <= #ARGV do                                           -- must free its place whatever becomes of its charge
    local n, leased, suffix = string.match(ARGV[a], '^(%d+)(c?)(.*)$')
    if suffix == '' then b = b + 1; subject = KEYS[b] else subject = KEYS[b] .. suffix end -- see admit.lua
    if leased == 'c' then redis.call('ZREM', subject .. ':c', id) end -- no longer in progress (again on a retry: no-op)
    a = a + 1 + per * tonumber(n)                               -- the next subject's head
  end
end
local cancel_seconds, cancel                                     -- an admission to cancel, if any
if string.find(ARGV[3], '!', 2, true) then cancel_seconds, cancel = string.match(ARGV[3], '!(%d+)/(.+)$') end
if cancel then
  cancel = KEYS[1] .. ':a:' .. cancel
  local admitted = tonumber(redis.call('GET', cancel))          -- when it admitted; nil: it did not, or has not run
  redis.call('SET', cancel, 'c', 'EX', cancel_seconds)          -- cancelled: if it runs later, it takes nothing
  if not admitted then return {} end                            -- nothing to undo
  ARGV[2] = admitted                                            -- undo in the buckets it took from
end
local marker_seconds, charge = string.match(ARGV[3], '/(%d+)/([^!]+)$')
local marker = charge and KEYS[1] .. ':x:' .. charge
if charge and not redis.call('SET', marker, '1', 'NX', 'EX', marker_seconds) then
  local done = redis.call('GET', marker)                        -- a retry of a charge that went through: done already;
  if not done or done == '1' then return {} end                 -- the thresholds it crossed, if any, are kept in its marker
  local out = {-1}                                              -- -1: applied before; then the time and the crossings
  for x in string.gmatch(done, '[^,]+') do out[#out + 1] = tonumber(x) end
  return out
end
local most = 2^53                                               -- what a bucket holds at most (config.MaxLimit, the largest
                                                                -- limit): Lua's doubles hold every count up to it exactly
local at = tonumber(ARGV[2]) or sec                             -- the admission's second (its buckets), else now's
local sliding = string.sub(ARGV[3], 1, 1) == 's'
local tokens, usd = tonumber(ARGV[4]), 0                        -- tokens, and nanodollars when there are any
if not tokens then
  tokens, usd = string.match(ARGV[4], '^(%-?%d+):?(%-?%d*)$')
  tokens, usd = tonumber(tokens), tonumber(usd) or 0
end
local amounts = {t = tokens, q = tonumber(ARGV[5]), u = usd}
local totals = {}
local crossed = {}                                              -- the thresholds buckets went past (alerts.lua)
local a = 6
local k, b, subject = 0, 0, nil                                 -- subjects read, KEYS used, the subject's key
while a <= #ARGV do
  local n, leased, suffix = tonumber(ARGV[a]), '', ''           -- a plain window count: the common case
  if not n then n, leased, suffix = string.match(ARGV[a], '^(%d+)(c?)(.*)$') end
  if suffix == '' then b = b + 1; subject = KEYS[b] else subject = KEYS[b] .. suffix end -- see admit.lua
  k = k + 1
  local o = read_overrides and overrides_of(subject) or no_overrides
  a = a + 1
  for j = 1, tonumber(n) do
    local amount = amounts[string.sub(ARGV[a], 1, 1)]
    local window = ARGV[a]
    local spec, bucket, start, w, calendar = period(window, amount > 0 and sec or at) -- added: the bucket current now;
    local limit = alerting and (o[spec] or tonumber(ARGV[a + 1])) -- given back: the admission's (period.lua)
    a = a + per
    local used = spent and spent[string.sub(window, 1, 1)] or 0
    if alerting and used > 0 then                               -- a reservation's request: alert on the usage charged
      local _, now_bucket, now_start, now_w = period(window, sec) -- in the bucket current now, kept beside it
      local ukey = subject .. ':' .. spec .. ':' .. now_bucket
      local left = math.max(math.ceil(now_start + now_w - now), 0) -- seconds to the bucket's end
      local ttl = left + 1 + ((sliding and not calendar) and now_w or 0) -- as the bucket's own
      local total_used = redis.call('INCRBY', ukey .. ':u', used)
      if total_used == used then redis.call('EXPIRE', ukey .. ':u', ttl) end -- a new counter lives as its bucket
      cross(crossed, ukey, total_used - used, total_used, limit, ttl, k, j, left)
    end
    local key = subject .. ':' .. spec .. ':' .. bucket         -- same slot as the subject: the hash tag is shared
    local ttl = math.max(math.ceil(start + w - now), 0) + 1     -- a bucket lives until its window ends,
    if sliding and not calendar then ttl = ttl + w end          -- and one more when sliding reads it
    local held, total = 0, 0
    if amount > 0 then                                          -- usage added (the common case): one command
      local add = math.min(amount, most)                        -- (INCRBY of both at most 2^53 cannot overflow)
      total = redis.call('INCRBY', key, add)                    -- keeps the bucket's expiry
      held = total - add                                        -- 0: a new bucket (one brought to 0 is deleted)
      if total > most then                                      -- not past 2^53 (charges past the limit pile up)
        total = most
        redis.call('SET', key, string.format('%.0f', most), 'EX', ttl)
      elseif held == 0 then
        redis.call('EXPIRE', key, ttl)                          -- a new bucket gets its own expiry
      end
    elseif amount < 0 then                                      -- given back: to the admission's bucket, if still there
      held = tonumber(redis.call('GET', key))                   -- nil: expired (or never made): nothing to give back
      if held then
        total = math.max(held + amount, 0)                      -- not below zero (a refund whose reservation went with a
        if total == 0 then                                      -- Redis restart: the window would admit more than its limit)
          redis.call('DEL', key)                                -- empty: gone now rather than at its expiry
        else
          redis.call('INCRBY', key, amount)                     -- keeps the bucket's expiry
        end
      end
    end
    if alerting and amount > 0 and not spent then               -- usage added (no reservation): did it pass a threshold?
      cross(crossed, key, held, total, limit, ttl, k, j, math.max(math.ceil(start + w - now), 0))
    end
    totals[#totals + 1] = total                                 -- 0 when untouched, expired or emptied
  end
end
if #crossed > 0 then                                            -- nothing more without a crossing
  totals[#totals + 1] = sec
  for _, x in ipairs(crossed) do totals[#totals + 1] = x end
  if marker then                                                -- a retry whose first answer was lost gets them too
    local kept = {string.format('%d', sec)}
    for _, x in ipairs(crossed) do kept[#kept + 1] = string.format('%d', x) end -- exact: %g would round past 2^47
    redis.call('SET', marker, table.concat(kept, ','), 'EX', marker_seconds)
  end
end
return totals
