-- alerts.lua: budget alerts (config.Alerts), for admit.lua and charge.lua.
-- A call that alerts ends its options argument (ARGV[3]) with '#', then 'o'
-- when a charge is to read the subjects' overrides (overrides.lua), then
-- 'i' when the call may write any key (one Redis server: the alert index
-- too, see below), then the alerts' owner (config.AlertOwner: 8 hex
-- digits), then without 'i' the hash tag of the call's slot
-- (cachekey.AppendSlotTag: 4 characters '@' to 'O'), then the thresholds,
-- percentages of a limit ('#1a2b3c4dAKOB50,80,100'), and gives each
-- window's limit. A bucket that goes past a threshold is marked, once for
-- every replica; in the same call the alert is written to its subject's
-- outbox (alertbox.lua delivers it), and the call reports it in its reply
-- (see the scripts).

local thresholds = {}                                           -- the percentages that alert, ascending ({}: none)
local index_too = false                                         -- write the alert index in this call ('i')
local owner = ''                                                -- the alerts' owner: whose outboxes and index
local slot_tag = ''                                             -- the call's slot's hash tag (not 'i')
local grace = 10                                                -- seconds the caller has to attach the alert's body
local kept = 7 * 86400 + 3600                                   -- an outbox outlives its last alert this long (config's
                                                                -- longest max_age_seconds, and an hour)

-- read_thresholds takes the alerts' suffix off the options, leaving them
-- as a call without alerts has them, and reports whether there was one and
-- whether it asks for overrides.
local function read_thresholds()
  if not string.find(ARGV[3], '#', 1, true) then return false, false end -- (a plain find: most calls have no alerts)
  local o, i, own, tag, list = string.match(ARGV[3], '#(o?)(i?)(%x%x%x%x%x%x%x%x)([@-O]*)([%d,]+)$')
  if not list then return false, false end
  ARGV[3] = string.sub(ARGV[3], 1, -(#o + #i + #own + #tag + #list + 2)) -- without '#', 'o', 'i', the owner, the tag and the list
  index_too, owner, slot_tag = i == 'i', own, tag
  for pct in string.gmatch(list, '%d+') do thresholds[#thresholds + 1] = tonumber(pct) end
  return true, o == 'o'
end

-- point is the least count that reaches pct% of limit, exactly: limit (up
-- to 2^53) is split at a multiple of 100, so that no product passes 2^53.
local function point(pct, limit)
  local r = math.fmod(limit, 100)                               -- exact, unlike %, for any double
  return pct * ((limit - r) / 100) + math.ceil(pct * r / 100)
end

-- list_outbox lists an outbox in the alert index of its owner (the end of
-- its key) among the rule's (base: 'atrl:alerts:{<rule>}', see
-- alertbox.lua) by when it has an alert due at the latest, and drops its
-- lease: whoever holds it has not seen this alert, and must not take the
-- outbox off the index. The owner is registered, if it was not.
local function list_outbox(base, outbox, due)
  local own = string.match(outbox, ':!o:(%x%x%x%x%x%x%x%x)$')
  if not own then return end                                    -- not an outbox
  local index = base .. ':' .. own
  local listed = tonumber(redis.call('ZSCORE', index, outbox))
  if not listed or listed > due then redis.call('ZADD', index, due, outbox) end
  redis.call('HDEL', index .. ':l', outbox)
  redis.call('EXPIRE', index, kept)
  redis.call('HSETNX', base .. ':c', own, sec)
  redis.call('EXPIRE', base .. ':c', kept)
end

-- record writes the alert of a crossing to the subject's outbox of the
-- call's owner ('<subject>:!o:<owner>'): a sorted set beside the subject
-- (its slot), of members
-- '<window>:<bucket>:!<pct>|<used>|<limit>|<reset>|<second>' (then
-- '|<body>', once the caller attaches it), scored by when the alert is due:
-- after grace, so that no replica delivers it before its body is there.
-- With 'i', the outbox is listed in its owner's alert index in this call
-- too. Otherwise (a Redis Cluster: the index is in another slot) the
-- caller lists it, and the outbox is noted, in this call, in the slot's
-- unlisted outboxes of the rule ('atrl:unlisted:{<slot tag>}:<rule>',
-- cachekey.Unlisted), by when, unless it is there already: the rule's
-- sweep finds there what no caller listed (alertbox.lua), and a claim of
-- the outbox, which is listed then, takes it out.
local function record(subject, head, pct, used, limit, reset)
  local outbox = subject .. ':!o:' .. owner
  redis.call('ZADD', outbox, now + grace, string.format('%s:!%d|%d|%d|%d|%d', head, pct, used, limit, reset, sec))
  redis.call('EXPIRE', outbox, kept)                            -- one nobody delivers goes in time
  local rule = string.match(subject, '^atrl:{([^|]*)|')
  if index_too then
    list_outbox('atrl:alerts:{' .. rule .. '}', outbox, now + grace) -- cachekey.AlertIndex
  elseif slot_tag ~= '' then
    local unlisted = 'atrl:unlisted:{' .. slot_tag .. '}:' .. rule
    redis.call('ZADD', unlisted, 'NX', sec, outbox)
    redis.call('EXPIRE', unlisted, kept)
  end
end

-- cross appends to out, for every threshold a bucket (key: its subject,
-- window and number) went past from before to after, of limit, {subject,
-- window, threshold, used, limit, reset, bucket}, subject and window being
-- indexes from 1 in ARGV order, when it is the first to: a marker beside the
-- bucket, living as long (ttl), says so, and the alert is recorded.
local function cross(out, key, before, after, limit, ttl, subject, window, reset)
  for _, pct in ipairs(thresholds) do
    local p = point(pct, limit)
    if before < p and p <= after and redis.call('SET', key .. ':!' .. pct, 1, 'NX', 'EX', ttl) then
      local owner, head, bucket = string.match(key, '^(.*):([^:]+:(%d+))$') -- the subject; its window and bucket
      record(owner, head, pct, after, limit, reset)
      for _, x in ipairs({subject, window, pct, after, limit, reset, tonumber(bucket)}) do out[#out + 1] = x end
    end
  end
end
