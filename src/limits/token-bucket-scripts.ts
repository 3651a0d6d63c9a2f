import { defineRedisScript } from "../cluster/run-redis-script.ts";

/**
 * The token bucket of `memory-rate-limiter.ts`, as Lua scripts that Redis runs atomically, one
 * per operation, with Redis's own clock (`TIME`) so replicas with skewed clocks agree.
 *
 * A bucket is a hash at KEYS[1] with `level` (units held at `updated`, may be negative),
 * `updated` (milliseconds) and `limit`; one whose limit changed is refilled at its old limit and
 * keeps what was used of it (the level moves by the change, capped at the new limit; lowered,
 * never below zero by the change alone, what that let it off kept in `forgiven` and owed again
 * should the limit be raised), as in the memory limiter (changeLimit). A missing key is a full bucket: a bucket that is full
 * again is deleted, and every other one expires two minutes after it would be full, so idle
 * keys leave no trace. Levels are written with 17 significant digits: a double survives the
 * round trip exactly, and the arithmetic is the memory limiter's, step for step.
 *
 * Arguments: ARGV[1] the limit, ARGV[2] milliseconds added to Redis's clock (0, except in
 * tests that move time), ARGV[3] the amount (take and adjust), ARGV[4] the take's deadline.
 *
 * Every reply ends with Redis's clock when the script ran (`clock`, whole milliseconds, without
 * ARGV[2]): the limiter learns from it how far Redis's clock is from its own, to set deadlines.
 */
/** In a settling script: the request began under `began`; the bucket keeps its own limit. */
const KEEP_STORED_LIMIT = `local began = limit
if storedLimit and storedLimit > 0 then limit = storedLimit end`;

const PRELUDE = bucketPrelude({ settling: false });

/**
 * The prelude of every script. `settling` (adjust): the bucket keeps the limit it has, and
 * `began` is the one the request was admitted under (ARGV[1]); a request that began before the
 * key's limit changed settles under the new one (converted back to its own, the bucket would undo
 * the new limit).
 */
function bucketPrelude(options: { settling: boolean }): string {
  return `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local time = redis.call('TIME')
local clock = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local now = clock + tonumber(ARGV[2])
local level = limit
local forgiven = 0
local stored = redis.call('HMGET', key, 'level', 'updated', 'limit', 'forgiven')
local storedLimit = tonumber(stored[3])
local changed = false
${options.settling ? KEEP_STORED_LIMIT : ""}

-- The level capped at \`cap\`: what the cap discards repays what a lowered limit forgave.
local function capped(raw, cap)
  if raw > cap then forgiven = math.max(0, forgiven - (raw - cap)) end
  return math.min(cap, raw)
end

if stored[1] and stored[2] and storedLimit and storedLimit > 0 then
  forgiven = tonumber(stored[4]) or 0
  local elapsed = math.max(0, now - tonumber(stored[2]))
  level = capped(tonumber(stored[1]) + elapsed * storedLimit / 60000, storedLimit)
  if storedLimit ~= limit then
    local change = limit - storedLimit
    if change < 0 then
      local floor = math.min(level, 0)
      local kept = level + change
      if kept < floor then forgiven = forgiven + floor - kept end
      level = math.max(kept, floor)
    else
      local owed = math.min(forgiven, change)
      forgiven = forgiven - owed
      level = capped(level + change - owed, limit)
    end
    changed = true
  end
end

local function state()
  local missing = limit - level
  local reset = 0
  if missing > 0 then reset = math.ceil(missing * 60000 / limit) end
  return math.max(0, math.floor(level)), reset
end

local function save()
  if level >= limit and forgiven <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'level', string.format('%.17g', level), 'updated', string.format('%.17g', now), 'limit', string.format('%.17g', limit), 'forgiven', string.format('%.17g', forgiven))
  redis.call('PEXPIRE', key, math.ceil((limit - level + forgiven) * 60000 / limit) + 120000)
end
`;
}

/** A take's first reply value when it ran after its deadline and took nothing. */
export const TAKE_TOO_LATE = -1;

/**
 * Takes ARGV[3] when the bucket holds that much. Returns `{allowed, remaining, resetMs,
 * retryAfterMs, clock}` (retryAfterMs -1: never).
 *
 * ARGV[4], when given, is a time on Redis's clock (milliseconds) shortly before the limiter
 * stops waiting for the answer. A take that Redis runs later (Redis was stalled, and the command
 * waited in its socket) takes nothing and returns `{TAKE_TOO_LATE, 0, 0, 0, clock}`: the limiter
 * has applied its failure policy to that request, so the request must not cost anything, nor
 * drain the bucket at a time it did not run. Without ARGV[4] there is no deadline.
 */
export const TAKE_SCRIPT = defineRedisScript(`${PRELUDE}
local deadline = tonumber(ARGV[4])
if deadline and clock > deadline then return {${TAKE_TOO_LATE}, 0, 0, 0, clock} end
local amount = tonumber(ARGV[3])
if level >= amount then
  level = level - amount
  save()
  local remaining, reset = state()
  return {1, remaining, reset, 0, clock}
end
-- A refused take still records a changed limit, from now: recomputed from the old one at each
-- take, a spent bucket refilled at the old rate until it covered the cut.
if changed then save() end
local remaining, reset = state()
local retry = -1
if amount <= limit then retry = math.ceil((amount - level) * 60000 / limit) end
return {0, remaining, reset, retry, clock}
`);

/**
 * Adds ARGV[3] (negative: takes), never above the limit. Returns `{remaining, resetMs, limit,
 * clock}`. No deadline: one that runs late gives back tokens (harmless) or records tokens a
 * request did use. A bucket whose limit has changed since the request began (the key was updated
 * while it ran) keeps its new limit, as the memory limiter's adjust does; what one that began
 * under a higher limit gives back repays first what the lowering forgave, its take being part of
 * what the lowering left the bucket short of (the correction was dropped: a key whose tpm changed mid-request lost
 * what its running requests took and did not use, up to a bucket).
 */
export const ADJUST_SCRIPT = defineRedisScript(`${bucketPrelude({ settling: true })}
local amount = tonumber(ARGV[3])
if began > limit and amount > 0 then
  local repaid = math.min(forgiven, amount)
  forgiven = forgiven - repaid
  amount = amount - repaid
end
level = capped(level + amount, limit)
save()
local remaining, reset = state()
return {remaining, reset, limit, clock}
`);

/** Reads the bucket without writing. Returns `{remaining, resetMs, clock}`. */
export const PEEK_SCRIPT = defineRedisScript(`${PRELUDE}
local remaining, reset = state()
return {remaining, reset, clock}
`);
