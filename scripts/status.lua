-- status.lua: how much of each limit the subjects in KEYS (one slot) have
-- used, read only: nothing is counted, reserved or swept.
--
-- KEYS[b]    the subjects' keys (see admit.lua)
-- ARGV[1]    the time in seconds (see admit.lua); the prelude reads it
-- ARGV[2]    options: 'f' (fixed windows) or 's' (sliding), then 'o' when
--            the subjects' overrides replace their configured limits
-- ARGV[3..]  per subject, as in admit.lua: its head (window count, 'c<N>'
--            for a concurrency limit, a key suffix), then n pairs (window, limit)
-- Reply: per subject, for each window in order and then for its
--   concurrency limit if any, four numbers: {limit, used, reset seconds,
--   overridden 0|1}, in the window's unit (a money window: nanodollars).
--   used is what the window counts now (sliding: with the
--   previous bucket's share, rounded up); for a concurrency limit, the
--   requests in progress
--   (reset 0). reset is when the window's bucket ends.

if clock_off() then return redis.error_reply('ATRL_TIME ' .. sec) end -- calendar bounds around another clock (period.lua)
local sliding = string.sub(ARGV[2], 1, 1) == 's'
local read_overrides = string.sub(ARGV[2], 2, 2) == 'o'
local eps = 1e-6                                                -- sliding shares are fractions (see admit.lua)
local reply = {}
local a = 3                                                     -- next ARGV to read
local b, subject = 0, nil                                       -- KEYS used, the subject's key
while a <= #ARGV do
  local n, max, _, suffix = string.match(ARGV[a], '^(%d+)c?(%d*)(s?)(.*)$') -- as in admit.lua
  if suffix == '' then b = b + 1; subject = KEYS[b] else subject = KEYS[b] .. suffix end
  local o = read_overrides and overrides_of(subject) or no_overrides
  a = a + 1
  for _ = 1, tonumber(n) do
    local spec, bucket, start, w, calendar = period(ARGV[a], sec) -- as admit.lua counts
    local limit = tonumber(ARGV[a + 1])
    a = a + 2
    local elapsed = sec - start + frac
    local used = tonumber(redis.call('GET', subject .. ':' .. spec .. ':' .. bucket)) or 0
    if sliding and not calendar then                                             -- the previous bucket's share still in the window
      local prev = tonumber(redis.call('GET', subject .. ':' .. spec .. ':' .. (bucket - 1))) or 0
      used = math.ceil(used + prev * (w - elapsed) / w - eps)
    end
    reply[#reply + 1] = o[spec] or limit                        -- the limit admissions apply
    reply[#reply + 1] = used
    reply[#reply + 1] = math.ceil(w - elapsed - eps)            -- seconds until the bucket ends
    reply[#reply + 1] = o[spec] and 1 or 0
  end
  if max ~= '' then                                             -- leases not expired: requests in progress
    reply[#reply + 1] = o.c or tonumber(max)
    reply[#reply + 1] = redis.call('ZCOUNT', subject .. ':c', '(' .. now, '+inf')
    reply[#reply + 1] = 0
    reply[#reply + 1] = o.c and 1 or 0
  end
end
return reply
