-- overrides.lua: a subject's limit overrides (limit_overrides), which the
-- admin API and the CLI set (manage.lua): a hash beside the subject's
-- counters, so in its slot, from a limit's name as the scripts write it
-- ('t60' a token window, 'q3600' a request window, 'u86400' a money window,
-- in nanodollars, 'c' the concurrency limit) to the limit that replaces the
-- configured one. Overrides have no expiry: they last until removed.

-- overrides_of returns a subject's overrides, by name ({} when it has none).
local function overrides_of(subject)
  local flat = redis.call('HGETALL', subject .. ':o')           -- {name, limit, name, limit, ...}
  local o = {}
  for i = 1, #flat, 2 do o[flat[i]] = tonumber(flat[i + 1]) end
  return o
end
local no_overrides = {}                                         -- what a subject has when they are not read
