-- manage.lua: an operator's change to subjects (admin API, CLI): 'reset'
-- clears windows, 'grant' gives tokens back, 'override' sets or removes a
-- subject's limit overrides (see overrides.lua). The operation is op, the
-- script's first argument (see scripts.go).
--
-- reset, grant:
-- KEYS[b]    the subjects' keys (one slot, see admit.lua)
-- ARGV[1]    the time in seconds (see admit.lua); the prelude reads it
-- ARGV[2]    options: 'f' (fixed windows) or 's' (sliding)
-- ARGV[3]    grant: the tokens to give back; reset: ''
-- ARGV[4..]  per subject: its head (window count, a key suffix, as in
--            charge.lua), then its windows to act on, e.g. 't60', 'q3600',
--            'u86400' (a money window)
-- Reply: reset, the number of buckets deleted; grant, the new count of each
--   window's current bucket, in order (request and money windows are left
--   alone: 0).
-- A reset deletes each window's bucket current now (and, sliding, the one
-- before, which it still reads). A grant takes the tokens off each token
-- window's current bucket (sliding: what that one does not hold, off the
-- one before), down to zero: it gives back what was used, never more, so
-- buckets stay within 0..2^53 as charge.lua keeps them.
--
-- override:
-- KEYS[1]    the subject's key (with its model suffix, for a per-model one)
-- ARGV[1]    the time (unused)
-- ARGV[2..]  pairs (name, limit) that replace all its overrides; none
--            removes them
-- Reply: its overrides after, {name, limit, ...}.

if op == 'override' then
  local key = KEYS[1] .. ':o'
  redis.call('DEL', key)                                        -- a set replaces, and none removes
  if #ARGV > 1 then redis.call('HSET', key, unpack(ARGV, 2)) end -- no expiry: they last until removed
  return redis.call('HGETALL', key)
end
if clock_off() then return redis.error_reply('ATRL_TIME ' .. sec) end -- calendar bounds around another clock (period.lua)
local sliding = string.sub(ARGV[2], 1, 1) == 's'
local tokens = tonumber(ARGV[3])                                -- nil for a reset
local reply, deleted = {}, 0

-- give_back takes up to n off a bucket, not below zero, deleting it when
-- empty (it keeps its expiry otherwise); returns what is left of n, and the
-- bucket's new count.
local function give_back(key, n)
  local held = tonumber(redis.call('GET', key)) or 0
  local taken = math.min(held, n)
  if taken <= 0 then return n, held end
  if taken == held then redis.call('DEL', key) else redis.call('DECRBY', key, taken) end
  return n - taken, held - taken
end

local a = 4
local b, subject = 0, nil
while a <= #ARGV do
  local n, suffix = string.match(ARGV[a], '^(%d+)c?(.*)$')
  if suffix == '' then b = b + 1; subject = KEYS[b] else subject = KEYS[b] .. suffix end
  a = a + 1
  for _ = 1, tonumber(n) do
    local spec, bucket, _, _, calendar = period(ARGV[a], sec)  -- as admit.lua counts
    a = a + 1
    local key = subject .. ':' .. spec .. ':' .. bucket
    local slides = sliding and not calendar
    if op == 'reset' then
      deleted = deleted + redis.call('DEL', key)
      if slides then deleted = deleted + redis.call('DEL', subject .. ':' .. spec .. ':' .. (bucket - 1)) end
    elseif string.sub(spec, 1, 1) ~= 't' then                   -- a grant gives tokens, not requests or money
      reply[#reply + 1] = 0
    else
      local rest, total = give_back(key, tokens)                -- the current bucket first
      if slides and rest > 0 then give_back(subject .. ':' .. spec .. ':' .. (bucket - 1), rest) end
      reply[#reply + 1] = total
    end
  end
end
if op == 'reset' then return deleted end
return reply
