-- alertbox.lua: delivering the budget alerts that alerts.lua writes to the
-- subjects' outboxes, by whichever replica gets there: an alert stays in its
-- outbox until a replica has POSTed it and the webhook took it (the replica
-- then removes it: ZREM), or until it is older than max_age_seconds.
--
-- An alert belongs to its owner (config.AlertOwner: the configuration's
-- webhook and reading of credentials), which ends its outbox's key
-- ('<subject>:!o:<owner>'). Each rule keeps, in the slot of
-- 'atrl:alerts:{<rule>}' (its base), a registry '<base>:c' (a hash): each
-- owner, and the second a replica of it last scanned (or an outbox of it
-- was first listed), and '<owner>:w' its webhook's name; '!last' the
-- last scan's second, '!up' the second since which scans have gone on
-- without a pause of a minute, '!at' the second of the last sweep, '!slot'
-- the next slot the sweep goes through. Beside it, each owner's index,
-- '<base>:<owner>', of its outboxes, scored by when an outbox next has an
-- alert due, and the leases of the replicas working on them,
-- '<base>:<owner>:l'. A listing (of an outbox that got an alert) drops the
-- outbox's lease: whoever holds it must not take the outbox off the index,
-- since it may not have seen the new alert. On a Redis Cluster an outbox
-- and the index are in two slots, so every operation touches the keys of
-- one: the call that writes an alert notes its outbox in its own slot
-- ('atrl:unlisted:{<slot tag>}:<rule>', see alerts.lua) for the sweep.
--
-- ARGV[1] is the time (the prelude), the operation's arguments follow:
--   list   KEYS: registry; ARGV[2] when the outboxes' next alert is due
--          ('': now), ARGV[3..] outboxes: lists each in its owner's index
--          by then at the latest, drops its lease
--   scan   KEYS: registry; ARGV[2] the owner, ARGV[3] at most how many
--          outboxes, ARGV[4] the lease's seconds, ARGV[5] the owner's
--          webhook, ARGV[6] '1' when its alerts are noted for the sweep:
--          notes the owner's scan and leases the outboxes of its index
--          that have an alert due. Once a second for the whole rule, it
--          also hands out the next slots to sweep (with '1'), and the
--          outboxes with an alert due of another owner no replica has
--          scanned for an hour, while scans went on (their configuration
--          is gone: its alerts are to be given up); an owner so silent
--          with an empty index is forgotten. Replies the lease's token,
--          the first slot to sweep ('': none), the silent owner's webhook
--          ('' : none, or unknown), the number of the owner's outboxes,
--          them, then the silent owner's
--   settle KEYS: registry; ARGV[2] outbox, ARGV[3] its lease's token,
--          ARGV[4] when its next alert is due ('' when it has none): lists
--          it by then, or takes it off the index when it is empty and
--          nothing was listed since the scan
--   claim  KEYS: outbox, its slot's unlisted outboxes of the rule; ARGV[2]
--          max age (seconds), ARGV[3] the least wait before another try
--          (seconds), ARGV[4] at most how many alerts: takes the outbox
--          off the unlisted (it is listed: it was scanned), takes the
--          alerts due, drops those older than the max age and puts the
--          others off (a try now, the next later: their age, at least 1 s
--          and the least wait, at most 60 s); replies when the next alert
--          is due ('' for none), the number dropped, the dropped, then the
--          others
--   attach KEYS: outbox; ARGV[2] an alert as alerts.lua wrote it, ARGV[3]
--          its body: replaces it with one that has the body, due now;
--          replies 1, or 0 when it is gone (delivered, or dropped)
--   unlisted KEYS: a slot's unlisted outboxes of a rule; ARGV[2] seconds,
--          ARGV[3] at most how many: replies those noted at least that
--          long ago (none claimed them since: no listing reached their
--          index)

local gap = 60                                                  -- a pause of scans that starts '!up' anew
local silent = 3600                                             -- an owner not scanned this long is gone
local sweep_slots = 16                                          -- slots swept a second, for the whole rule: all
                                                                -- 16384 in about 17 minutes

-- lease leases at most n outboxes of an index that have an alert due, for
-- the scan's token, until a second, appending them to out.
local function lease(index, n, token, until_, out)
  for _, outbox in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, n)) do
    redis.call('HSET', index .. ':l', outbox, token)
    redis.call('EXPIRE', index .. ':l', kept)
    redis.call('ZADD', index, until_, outbox)                   -- not due to others until the lease ends
    out[#out + 1] = outbox
  end
end

-- index_of is the index of an outbox's owner (nil: not an outbox).
local function index_of(base, outbox)
  local own = string.match(outbox, ':!o:(%x%x%x%x%x%x%x%x)$')
  return own and base .. ':' .. own
end

if op == 'list' then
  local base, due = string.sub(KEYS[1], 1, -3), tonumber(ARGV[2]) or now
  for i = 3, #ARGV do list_outbox(base, ARGV[i], due) end       -- see alerts.lua
  return 1
elseif op == 'scan' then
  local reg, own, n = KEYS[1], ARGV[2], tonumber(ARGV[3])
  local base = string.sub(reg, 1, -3)
  local last = tonumber(redis.call('HGET', reg, '!last'))
  if not last or sec - last > gap then redis.call('HSET', reg, '!up', sec) end
  redis.call('HSET', reg, '!last', sec, own, sec, own .. ':w', ARGV[5])
  redis.call('EXPIRE', reg, kept)
  local sweep, silent_owner, webhook = '', nil, ''
  if sec > (tonumber(redis.call('HGET', reg, '!at')) or 0) then -- the rule's second: sweep, and look for a silent owner
    redis.call('HSET', reg, '!at', sec)
    if ARGV[6] == '1' then
      local slot = tonumber(redis.call('HGET', reg, '!slot')) or 0
      redis.call('HSET', reg, '!slot', (slot + sweep_slots) % 16384)
      sweep = slot
    end
    if sec - (tonumber(redis.call('HGET', reg, '!up')) or sec) >= silent then
      local all = redis.call('HGETALL', reg)
      for i = 1, #all, 2 do
        local o = all[i]
        if o ~= own and string.match(o, '^%x%x%x%x%x%x%x%x$') and sec - (tonumber(all[i + 1]) or sec) >= silent then
          if redis.call('EXISTS', base .. ':' .. o) == 1 then
            silent_owner, webhook = o, redis.call('HGET', reg, o .. ':w') or ''
            break
          end
          redis.call('HDEL', reg, o, o .. ':w')                 -- gone, and nothing of it left listed
        end
      end
    end
  end
  local token = string.format('%.6f', now)                      -- this scan's leases (a replica's scans differ in time)
  local until_ = math.floor(now) + tonumber(ARGV[4])
  local out = {token, tostring(sweep), webhook, "0"}
  lease(base .. ':' .. own, n, token, until_, out)
  out[4] = tostring(#out - 4)
  if silent_owner then lease(base .. ':' .. silent_owner, n, token, until_, out) end
  return out
elseif op == 'settle' then
  local index = index_of(string.sub(KEYS[1], 1, -3), ARGV[2])
  if not index then return 1 end
  local leases, outbox, token, due = index .. ':l', ARGV[2], ARGV[3], tonumber(ARGV[4])
  if redis.call('HGET', leases, outbox) == token then           -- still ours, nothing listed since the scan
    redis.call('HDEL', leases, outbox)
    if due then redis.call('ZADD', index, due, outbox) else redis.call('ZREM', index, outbox) end
  elseif due then                                               -- listed since (or taken by another scan):
    local listed = tonumber(redis.call('ZSCORE', index, outbox)) -- keep it listed, by the earlier time
    if not listed or listed > due then redis.call('ZADD', index, due, outbox) end
  end
  return 1
elseif op == 'claim' then
  local max_age, least, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  redis.call('ZREM', KEYS[2], KEYS[1])
  local dropped, taken = {}, {}
  for _, alert in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, n)) do
    local made = tonumber(string.match(alert, '^[^|]*|%d+|%d+|%d+|(%d+)')) -- its second (see alerts.lua)
    local age = made and now - made or max_age + 1              -- not the limiter's: dropped
    if age > max_age then
      redis.call('ZREM', KEYS[1], alert)
      dropped[#dropped + 1] = alert
    else
      redis.call('ZADD', KEYS[1], now + math.max(least, math.min(math.max(age, 1), 60)), alert)
      taken[#taken + 1] = alert
    end
  end
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local out = {first[2] or '', #dropped}
  for _, alert in ipairs(dropped) do out[#out + 1] = alert end
  for _, alert in ipairs(taken) do out[#out + 1] = alert end
  return out
elseif op == 'unlisted' then
  return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', sec - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[3]))
else -- attach
  if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[1], now, ARGV[2] .. '|' .. ARGV[3])
  return 1
end
