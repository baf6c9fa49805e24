-- period.lua: which bucket of a window a second falls in, for every script.
-- A window aligned to the epoch is written 't60' (unit letter, length in
-- seconds): its buckets are its length long, numbered t / length. A
-- calendar window (a week, a month, a day in a time zone: see
-- config.Calendar) is written 't2592000@b0:b1:b2:b3': its name, then the
-- bounds of four periods the caller worked out around its own clock:
-- [b0, b1), [b1, b2), [b2, b3). Its buckets are numbered by their start.

-- period returns the window's name (what its keys and overrides use), the
-- number of the bucket that holds second t, that bucket's start and length,
-- and whether the window follows the calendar (it never slides). A time
-- before b0 or after b3 (only an old admission's, for a refund) takes the
-- nearest period.
local function period(spec, t)
  if not string.find(spec, '@', 2, true) then                   -- aligned to the epoch (a plain find: the common case)
    local w = tonumber(string.sub(spec, 2))
    local bucket = math.floor(t / w)
    return spec, bucket, bucket * w, w, false
  end
  local name, b0, b1, b2, b3 = string.match(spec, '^(%a%d+)@(%d+):(%d+):(%d+):(%d+)$')
  b0, b1, b2, b3 = tonumber(b0), tonumber(b1), tonumber(b2), tonumber(b3)
  if t >= b2 then return name, b2, b2, b3 - b2, true end        -- the next period (the caller's clock was behind)
  if t >= b1 then return name, b1, b1, b2 - b1, true end        -- the period of the caller's clock
  return name, b0, b0, b1 - b0, true                            -- the one before
end

-- clock_off says whether a calendar window's bounds in ARGV leave Redis's
-- second outside [b1, b3): the caller's clock is off by a period (or more)
-- from Redis's, and must be told Redis's time to try again (every script
-- checks this before it writes anything).
local function clock_off()
  for i = 1, #ARGV do
    if string.find(ARGV[i], '@', 2, true) then                  -- (a plain find: most calls have no calendar window)
      local b1, b3 = string.match(ARGV[i], '^%a%d+@%d+:(%d+):%d+:(%d+)$')
      if b1 and (sec < tonumber(b1) or sec >= tonumber(b3)) then return true end
    end
  end
  return false
end
