-- admit.lua: may one more request go, and (with a cost) reserve it.
-- Checks every window and concurrency limit of every subject in KEYS (one
-- Redis Cluster slot) in one atomic step; when the request may go, counts it
-- in every request window, reserves the cost in every token window and takes
-- a concurrency lease, in all of them or in none.
--
-- KEYS[b]    the subjects' keys (see package cachekey): atrl:{rule|type|source|value}
-- ARGV[1]    the time in seconds (may have a fraction); empty in production,
--            where Redis's own clock is used (tests pass one); the prelude
--            (scripts.go) reads it into sec + frac = now
-- ARGV[2]    tokens to reserve, then ':' and nanodollars when money windows
--            reserve some ("1200" or "1200:3250000"): 0 checks those windows
--            only ("used < limit"); more admits only when "used + cost <=
--            limit" in every token (money) window (at most estimate.MaxTokens
--            tokens, 2^53 nanodollars, and limits at most 2^53: exact here)
-- ARGV[3]    options: 'f' (fixed windows) or 's' (sliding), in capitals ('F',
--            'S') when the reply is to give the tightest window of each kind
--            too (the quota headers of every kind), then 'o' when
--            the subjects' overrides (overrides.lua) replace their configured
--            limits, then, when the
--            request takes leases, '<lease seconds>:<lease id>', then, when
--            the admission takes anything, '!<seconds>/<marker id>': it notes
--            when it ran in its marker for that long, so that a cancel (see
--            charge.lua) can undo it, and takes nothing once cancelled, then,
--            with budget alerts, '#' and the thresholds (alerts.lua)
-- ARGV[4..]  per subject, in order: its window count n, followed by 'c<N>'
--            when at most N of its requests may be in progress ('c<N>s': a
--            soft limit, which takes leases but never rejects), followed by
--            a key suffix (':m:<model>') when its key is the last KEYS one
--            with that suffix (a per_model limit after its parent; otherwise
--            its key is the next of KEYS); then n pairs
--            (window, limit), window being 't' (tokens), 'q' (requests) or
--            'u' (money, in nanodollars) and its length in seconds, e.g. 't60',
--            limit followed by 's' when the window is soft: it never closes,
--            then by '%<percent>' when only that much of it is open to the
--            request's priority level ('1000%70': 700; the rest is kept for
--            higher levels); a concurrency limit too ('c10%70', 'c10s%70')
-- then, with model_fallbacks, per model to serve instead, in order: '|'
--            and what it reserves (as ARGV[2]), then its subjects (as above;
--            none: it has no subject in this slot, so it fits here)
-- The request is served as the first of these candidates (the asked model,
-- then its fallbacks) whose limits all have room (or are soft); each is
-- checked with its own subjects and reservation, so a limit they share
-- with the same need rejects them all. Nothing is taken for the others.
-- Reply: {allowed, limit, remaining, reset seconds, now, kind, wait ms,
--   subject, window}, {0, 1, 0, 0, now, 0, 0, 1, 0} when cancelled before it
--   ran, where allowed is 1, 0 (rejected), or 2 (admitted only because the
--   limits that have no room are soft), and limit, remaining, reset, kind,
--   wait, subject and window describe the limit that decides (a closed one
--   before a soft one with no room, before an open one; among closed, the
--   one that has room last; among open, the token window with the fewest
--   tokens left, else the request window with the fewest requests left),
--   remaining counts this request, now is the second
--   the buckets were taken at (a refund goes back into them later), kind
--   is what the deciding limit counts: 0 tokens, 1 requests, 2 requests in
--   progress, 3 nanodollars, and wait is how long until it has room, in milliseconds (0 when
--   allowed, and for requests in progress, which can end any time), and
--   subject is the index (from 1, in ARGV order) of the subject it belongs to,
--   window the index of the window in it (from 1; 0: its concurrency limit);
--   then, asked for ('F', 'S'), for tokens, requests and money in turn, the
--   window of that kind that decides as above, 5 numbers each: limit,
--   remaining, reset in milliseconds (to the window's end, or to room when
--   closed), subject, window (all 0: no window of that kind);
--   then, asked for ('F', 'S') with overrides read ('o'), the overrides
--   that replaced a configured limit: their count, then 3 numbers each:
--   subject, window (0: the concurrency limit), limit (the quota headers
--   show the limits that hold);
--   then, with alerts, 7 numbers per threshold a bucket went past (see
--   alerts.lua: subject, window, threshold, used, limit, reset seconds,
--   bucket).
-- With fallbacks, the first 9 numbers are followed by 2: served, the
--   candidate (from 0, the asked model) that the reply is about (admitted;
--   rejected: the one that has room first), and, when it is admitted only
--   over soft limits, the first candidate whose limits all have room (-1:
--   none), which shadow_mode reports; subjects and windows are the served
--   candidate's, counted from 1 in its own list.

local alerting = read_thresholds()                              -- budget alerts: ARGV[3] loses its suffix
local cost, usd = tonumber(ARGV[2]), 0                          -- tokens, and nanodollars when money windows reserve some
if not cost then
  cost, usd = string.match(ARGV[2], '^(%d+):?(%d*)$')
  cost, usd = tonumber(cost), tonumber(usd) or 0
end
local options = ARGV[3]
local wtype = string.sub(options, 1, 1)                         -- 'f', 's', 'F', 'S'
local sliding = wtype == 's' or wtype == 'S'
local by_kind = wtype == 'F' or wtype == 'S'                    -- report each kind's tightest window
local read_overrides, lease, id, marker_seconds, marker = false  -- (the window type alone: none of the rest)
if #options > 1 then
  read_overrides = string.sub(options, 2, 2) == 'o'             -- limit_overrides
  lease, id = string.match(options, '^.o?(%d+):([^!]+)')        -- nil when no lease is taken
  marker_seconds, marker = string.match(options, '!(%d+)/(.+)$') -- nil when nothing would need undoing
end
if clock_off() then return redis.error_reply('ATRL_TIME ' .. sec) end -- calendar bounds around another clock (period.lua)
redis.call('SET', KEYS[1], '', 'XX')                            -- writes nothing (no subject key exists itself), but a
                                                                -- full Redis (maxmemory, noeviction) refuses it here, before
                                                                -- anything is read or taken: failure_mode decides, rather
                                                                -- than an admission whose charge will be refused
local kinds = {t = 0, q = 1, u = 3}                             -- 2 is a concurrency limit
local eps = 1e-6                                                -- sliding weights are fractions: compare with a margin
                                                                -- (a millionth of a token: counts up to 10^9 stay exact)
-- What check finds of one candidate's limits (the asked model's, or a fallback's):
local verdict                                                   -- {state, limit, remaining, reset, kind, wait ms, subject, window}
local tightest                                                  -- by kind, the verdict of that kind's windows alone (by_kind)
local counters                                                  -- {key, amount, ttl} to add to if admitted
local leases                                                    -- concurrency sets to take a lease in
local applied                                                   -- overrides in force: subject, window, limit (by_kind)

-- A limit's state: 1 open (room for the request), 0 closed, 2 closed but
-- soft (it counts, but does not reject). rank orders them for better.
local rank = {[1] = 0, [2] = 1, [0] = 2}                        -- closed beats soft-closed beats open

-- better says whether a limit (state, left, reset, kind, wait ms) decides over v, the verdict so far.
-- (The plugin orders the verdicts of several calls the same way: Verdict.DecidesOver.)
local function better(v, state, left, reset, kind, ms)
  if v == nil then return true end
  if state ~= v[1] then return rank[state] > rank[v[1]] end
  if state ~= 1 then return ms > v[6] end                       -- among closed: the one that has room last
  if kind ~= v[5] then return kind < v[5] end                   -- among open: token windows first (the headers name tokens)
  return left < v[3] or (left == v[3] and reset > v[4])         -- then the tightest
end

-- decides notes a limit (state, limit, left, reset, kind, wait ms, subject,
-- window; reset_ms: its reset in milliseconds) where it decides: as the verdict, and
-- as its kind's tightest.
local function decides(state, limit, left, reset, kind, ms, k, j, reset_ms)
  local remaining = math.max(math.floor(left), 0)
  if better(verdict, state, left, reset, kind, ms) then
    verdict = {state, limit, remaining, reset, kind, ms, k, j}
  end
  if by_kind and better(tightest[kind], state, left, reset, kind, ms) then
    tightest[kind] = {state, limit, remaining, reset, kind, ms, k, j, reset_ms}
  end
end

-- share is what of limit (an integer up to 2^53) is open to a request of a
-- level with open percent of it, rounded down: exact (limit * open could
-- pass 2^53), as config.Share works it out.
local function share(limit, open)
  local hundreds = math.floor(limit / 100)
  return hundreds * open + math.floor((limit - hundreds * 100) * open / 100)
end

-- wait is how long until used (+ the previous bucket's share when sliding)
-- leaves room for need, in seconds, for a window of length w, elapsed into
-- its bucket: the end of the bucket when fixed; when sliding, the moment the
-- previous bucket's share has shrunk enough, which may be in the next bucket.
local function wait(w, elapsed, cur, prev, need, limit, slides)
  if not slides then return w - elapsed end
  if cur + need <= limit then                                   -- fits once prev has shrunk, in this bucket
    if prev <= 0 then return 0 end
    return math.max(w * (prev - (limit - need - cur)) / prev - elapsed, 0)
  end
  if need > limit then return 2 * w - elapsed end               -- never fits: report the end of the next bucket
  return (w - elapsed) + w * (cur - (limit - need)) / cur       -- cur becomes the previous bucket and shrinks
end

local b = 0                                                     -- KEYS used (every candidate's, in turn)

-- check reads one candidate's subjects, from ARGV[a] to the next '|' or the
-- end, and decides each of its limits for a request that reserves cost
-- tokens and usd nanodollars; it returns the ARGV after them.
local function check(a, cost, usd)
  verdict, tightest, counters, leases, applied = nil, {}, {}, {}, {}
  local k, subject = 0, nil                                     -- subjects read, the subject's key
  while a <= #ARGV and string.byte(ARGV[a]) ~= 124 do           -- up to a '|': the next candidate
    local n, max, csoft, cshare, suffix = tonumber(ARGV[a]), '', '', '', '' -- a plain window count: the common case
    if not n then                                                 -- window count, concurrency limit ('' for none), 's' when
      n, max, csoft, cshare, suffix = string.match(ARGV[a], '^(%d+)c?(%d*)(s?)%%?(%d*)(.*)$') -- soft, its open percent, suffix
    end
    if suffix == '' then b = b + 1; subject = KEYS[b] else subject = KEYS[b] .. suffix end -- a suffix: its parent's key, extended
    k = k + 1
    local o = read_overrides and overrides_of(subject) or no_overrides
    max = tonumber(max)
    if max and o.c then                                           -- an override changes a limit, never adds one
      max = o.c
      if by_kind then applied[#applied + 1] = {k, 0, max} end
    end
    if max and cshare ~= '' then max = share(max, tonumber(cshare)) end -- the part open to the request's level
    a = a + 1
    for j = 1, tonumber(n) do
      local name, bucket, start, w, calendar = period(ARGV[a], sec) -- epoch-aligned, or a calendar period (period.lua)
      local configured, soft, open = tonumber(ARGV[a + 1]), '', '' -- a plain limit: the common case
      if not configured then                                      -- 's': a soft window, which never closes; a percent:
        configured, soft, open = string.match(ARGV[a + 1], '^(%d+)(s?)%%?(%d*)$') -- the part open to the request's level
      end
      local spec, limit = name, o[name] or tonumber(configured)
      if o[name] and by_kind then applied[#applied + 1] = {k, j, limit} end
      if open ~= '' then limit = share(limit, tonumber(open)) end
      a = a + 2
      local kind = kinds[string.sub(spec, 1, 1)]
      local slides = sliding and not calendar                     -- a calendar window is always fixed
      local elapsed = sec - start + frac                          -- seconds into the bucket (exact: whole seconds apart)
      local key = subject .. ':' .. spec .. ':' .. bucket
      local cur = tonumber(redis.call('GET', key)) or 0
      local prev = 0
      if slides then                                              -- the previous bucket, weighted by its part still in the window
        prev = tonumber(redis.call('GET', subject .. ':' .. spec .. ':' .. (bucket - 1))) or 0
      end
      local used = cur + prev * (w - elapsed) / w                 -- (exact when prev is all in the window)
      local need = kind == 1 and 1 or (kind == 3 and usd or cost) -- a request counts 1 in request windows
      local left = limit - used - need                            -- what this request would leave
      local fits = left > -eps and (need > 0 or left > eps)       -- room for all of it; checking only: room left
      local state = fits and 1 or (soft == 's' and 2 or 0)        -- 's': a soft window, which never closes
      local secs = fits and w - elapsed or wait(w, elapsed, cur, prev, need, limit, slides) -- to the window's end, or to room
      local reset = math.ceil(secs - eps)
      local ms = math.ceil(secs * 1000 - 1e-3)                    -- (less 1 µs: the float error of a time near 2^31 s)
      decides(state, limit, left, reset, kind, fits and 0 or ms, k, j, ms)
      if need > 0 then                                            -- a bucket lives until its window ends (+1 s against clock
        local ttl = math.ceil(w - elapsed) + 1                    -- rounding), and one window more when sliding reads it as
        if slides then ttl = ttl + w end                          -- the previous bucket
        counters[#counters + 1] = {key, need, ttl, k, j, limit, reset, kind}
      end
    end
    if max then                                                   -- at most max requests of this subject in progress
      local set = subject .. ':c'
      redis.call('ZREMRANGEBYSCORE', set, '-inf', now)            -- sweep leases that expired (their gateway never released them)
      local held = redis.call('ZCARD', set)
      local state = held < max and 1 or (csoft == 's' and 2 or 0)
      decides(state, max, max - held - 1, 1, 2, 0, k, 0, 1000)    -- retry in 1 s: a release can come any time
      leases[#leases + 1] = set
    end
  end
  if not verdict then verdict = {1, 0, 0, 0, 0, 0, 0, 0} end  -- no subject here: nothing to stop it
  return a
end

-- admission_markers names the markers of the admission (see ARGV[3]): a
-- candidate's is '<first key of its subjects>:a:<marker id>', followed by
-- '.<its index>' for a fallback, whose cancel names it so; a candidate
-- without subjects here has none. It returns them all, and by candidate.
local function admission_markers(fallbacks)
  if not fallbacks then
    local key = KEYS[1] .. ':a:' .. marker
    return {key}, {[0] = key}
  end
  local all, of, c, a, k, first = {}, {}, 0, 4, 0, true
  while a <= #ARGV do
    if string.byte(ARGV[a]) == 124 then                         -- '|': the next candidate
      c, first, a = c + 1, true, a + 1
    else
      local n, suffix = string.match(ARGV[a], '^(%d+)c?%d*s?%%?%d*(.*)$')
      if suffix == '' then k = k + 1 end
      if first then                                             -- its first subject: never a suffix
        of[c] = KEYS[k] .. ':a:' .. marker .. (c > 0 and '.' .. c or '')
        all[#all + 1], first = of[c], false
      end
      a = a + 1 + 2 * tonumber(n)
    end
  end
  return all, of
end

-- amounts reads a candidate's reservation: tokens, and nanodollars ('' when none).
local function amounts(arg)
  local t, u = string.match(arg, '^|?(%d+):?(%d*)$')
  return tonumber(t), tonumber(u) or 0
end

local a = check(4, cost, usd)                                   -- the asked model
local served, would = 0, nil                                    -- the candidate served; with soft limits, the first that fits
if a <= #ARGV then                                              -- model_fallbacks: candidates to serve instead, in order
  local found = {verdict, tightest, counters, leases, applied}  -- what is served (or reported)
  local c = 0
  while a <= #ARGV and (found[1][1] ~= 1 and not would) do      -- until one is open (after soft: the first open one)
    c = c + 1
    local t, u = amounts(ARGV[a])
    a = check(a + 1, t, u)
    if verdict[1] == 1 and found[1][1] == 2 then                -- served over soft limits: this one would have fitted
      would = c
    elseif found[1][1] == 0 and (verdict[1] ~= 0 or verdict[6] < found[1][6]) then -- rejected so far: this one fits, or has room sooner
      found, served = {verdict, tightest, counters, leases, applied}, c
    end
  end
  verdict, tightest, counters, leases, applied = found[1], found[2], found[3], found[4], found[5]
  would = would or -1
end
local crossed = {}                                              -- the thresholds buckets went past (alerts.lua)
if verdict[1] ~= 0 then                                         -- admitted: count, reserve and lease everywhere
  if marker then
    local all, of = admission_markers(would ~= nil)
    if redis.call('EXISTS', unpack(all)) > 0 then               -- cancelled before it ran (its stream had gone):
      return {0, 1, 0, 0, math.floor(now), 0, 0, 1, 0}          -- take nothing; no one reads the answer
    end
    if of[served] then                                          -- the buckets a cancel gives back to
      redis.call('SET', of[served], math.floor(now), 'EX', marker_seconds)
    end
  end
  for _, c in ipairs(counters) do
    local total = redis.call('INCRBY', c[1], c[2])
    if alerting and c[8] == 1 then                              -- a request counted is a request made; a reservation is
      cross(crossed, c[1], total - c[2], total, c[6], c[3], c[4], c[5], c[7]) -- no usage: token and money windows alert on
    end                                                         -- charges (charge.lua)
    if total == c[2] then redis.call('EXPIRE', c[1], c[3]) end  -- only a new bucket gets its expiry (a bucket brought to 0
                                                                -- is deleted: one that held nothing is new)
  end
  for _, set in ipairs(leases) do
    redis.call('ZADD', set, now + tonumber(lease), id)          -- scored by when the lease expires
    redis.call('EXPIRE', set, tonumber(lease) + 1)              -- the set goes when its last lease would
  end
end
local reply = {verdict[1], verdict[2], verdict[3], verdict[4], math.floor(now), verdict[5], verdict[6], verdict[7], verdict[8]}
if would then reply[10], reply[11] = served, would end          -- with fallbacks
if by_kind then                                                 -- tokens, requests, money: 5 numbers each
  for _, kind in ipairs({0, 1, 3}) do
    local t = tightest[kind] or {0, 0, 0, 0, 0, 0, 0, 0, 0}
    for _, x in ipairs({t[2], t[3], t[9], t[7], t[8]}) do reply[#reply + 1] = x end
  end
  if read_overrides then                                        -- the overrides in force: a count, 3 numbers each
    reply[#reply + 1] = #applied
    for _, x in ipairs(applied) do
      reply[#reply + 1] = x[1]; reply[#reply + 1] = x[2]; reply[#reply + 1] = x[3]
    end
  end
end
for _, x in ipairs(crossed) do reply[#reply + 1] = x end        -- nothing more without a crossing
return reply
