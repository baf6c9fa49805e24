-- alertbox.lua: delivering the budget alerts that alerts.lua writes to the
-- subjects' outboxes, by whichever replica gets there: an alert stays in its
-- outbox until a replica has POSTed it and the webhook took it (the replica
-- then removes it: ZREM), or until it is older than max_age_seconds.
--
-- Each rule keeps an index of its outboxes, 'atrl:alerts:{<rule>}' (see
-- cachekey.AlertIndex), scored by when an outbox next has an alert due, and
-- beside it, in the same slot, the leases of the replicas working on them,
-- '<index>:l'. A listing (of an outbox that got an alert) drops the outbox's
-- lease: whoever holds it must not take the outbox off the index, since it
-- may not have seen the new alert. On a Redis Cluster an outbox and the
-- index are in two slots, so every operation touches the keys of one.
--
-- ARGV[1] is the time (the prelude), the operation's arguments follow:
--   list   KEYS: index, leases; ARGV[2] outbox, ARGV[3] when its next alert
--          is due ('': now): lists the outbox by then at the latest, drops
--          its lease
--   scan   KEYS: index, leases; ARGV[2] at most how many outboxes, ARGV[3]
--          the lease's seconds: leases the outboxes with an alert due;
--          replies the lease's token, then the outboxes
--   settle KEYS: index, leases; ARGV[2] outbox, ARGV[3] its lease's token,
--          ARGV[4] when its next alert is due ('' when it has none): lists
--          it by then, or takes it off the index when it is empty and
--          nothing was listed since the scan
--   claim  KEYS: outbox; ARGV[2] max age (seconds), ARGV[3] the least wait
--          before another try (seconds), ARGV[4] at most how many alerts:
--          takes the alerts due, drops those older than the max age and
--          puts the others off (a try now, the next later: their age, at
--          least 1 s and the least wait, at most 60 s); replies when the
--          next alert is due ('' for none), the number dropped, the
--          dropped, then the others
--   attach KEYS: outbox; ARGV[2] an alert as alerts.lua wrote it, ARGV[3]
--          its body: replaces it with one that has the body, due now;
--          replies 1, or 0 when it is gone (delivered, or dropped)

if op == 'list' then
  list_outbox(KEYS[1], KEYS[2], ARGV[2], tonumber(ARGV[3]) or now) -- see alerts.lua
  return 1
elseif op == 'scan' then
  local token = string.format('%.6f', now)                      -- this scan's leases (a replica's scans differ in time)
  local until_ = math.floor(now) + tonumber(ARGV[3])
  local out = {token}
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
  for _, outbox in ipairs(due) do
    redis.call('HSET', KEYS[2], outbox, token)
    redis.call('ZADD', KEYS[1], until_, outbox)                 -- not due to others until the lease ends
    out[#out + 1] = outbox
  end
  return out
elseif op == 'settle' then
  local outbox, token, due = ARGV[2], ARGV[3], tonumber(ARGV[4])
  if redis.call('HGET', KEYS[2], outbox) == token then          -- still ours, nothing listed since the scan
    redis.call('HDEL', KEYS[2], outbox)
    if due then redis.call('ZADD', KEYS[1], due, outbox) else redis.call('ZREM', KEYS[1], outbox) end
  elseif due then                                               -- listed since (or taken by another scan):
    local listed = tonumber(redis.call('ZSCORE', KEYS[1], outbox)) -- keep it listed, by the earlier time
    if not listed or listed > due then redis.call('ZADD', KEYS[1], due, outbox) end
  end
  return 1
elseif op == 'claim' then
  local max_age, least, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
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
else -- attach
  if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[1], now, ARGV[2] .. '|' .. ARGV[3])
  return 1
end
