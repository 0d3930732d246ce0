-- prelude.lua: helpers for the scripts that keep redquorum's own keys. The client prepends
-- this file to acquire.lua, extend.lua, extend_many.lua, fence.lua, record.lua, guard.lua, ttl_read.lua,
-- commission.lua, withdraw.lua, members.lua and the lock kinds' scripts (whose shared
-- blocks end this file); it
-- defines functions only and touches no key.
--
-- Every key redquorum keeps for itself (the restart guard's epoch marker and ttl records,
-- the fencing counters) is a hash whose field `redquorum` names its kind. A script writes
-- such a key only when it is absent or carries its kind, so even with an empty key prefix
-- it never changes data that an application wrote: it answers `REDQUORUM_FOREIGN <key>`
-- instead, before writing anything.

-- The master's clock, in milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- True when `key` is absent or is one of ours of `kind`.
local function owned(key, kind)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then
    return true
  end
  return t == 'hash' and redis.call('HGET', key, 'redquorum') == kind
end

local function foreign(key)
  return redis.error_reply('REDQUORUM_FOREIGN ' .. key)
end

-- Integer milliseconds as a string (Lua numbers are doubles).
local function ms(n)
  return string.format('%.0f', n)
end

-- The ttl records (`key`, kind `ttls`): field = a ttl in ms, value = master time until which
-- the record must stay. Records that `ttl` (a decimal string) is in use until now + 2·ttl,
-- never lowering an existing record, drops records that have run out, and lets the key
-- expire with its last record.
local function record_ttl(key, ttl, now)
  local untl = now + 2 * tonumber(ttl)
  local current = tonumber(redis.call('HGET', key, ttl) or '0')
  if untl > current then
    redis.call('HSET', key, 'redquorum', 'ttls', ttl, ms(untl))
  end
  local last = 0
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local name, value = fields[i], tonumber(fields[i + 1])
    if name ~= 'redquorum' then
      if value == nil or value <= now then
        redis.call('HDEL', key, name)
      elseif value > last then
        last = value
      end
    end
  end
  if last > 0 then
    redis.call('PEXPIREAT', key, ms(last))
  end
end

-- The longest ttl whose record has not run out, 0 when none.
local function longest_ttl(key, now)
  local longest = 0
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local ttl, untl = tonumber(fields[i]), tonumber(fields[i + 1])
    if ttl ~= nil and untl ~= nil and untl > now and ttl > longest then
      longest = ttl
    end
  end
  return longest
end

-- Holder sets (readers of a read-write lock, holders of semaphore permits): a sorted set of
-- holder values scored by the master time their hold expires, plus the member `redquorum`
-- scored +inf that marks the set as ours (and, for a semaphore, `redquorum:k` scored -k,
-- the number of permits). Holders have positive scores; the key expires with the last one.
local function holders_owned(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then
    return true
  end
  return t == 'zset' and redis.call('ZSCORE', key, 'redquorum') == 'inf'
end

-- Drops the holders whose hold has run out; returns how many are left.
local function holders_live(key, now)
  redis.call('ZREMRANGEBYSCORE', key, '0', ms(now))
  return redis.call('ZCOUNT', key, '(' .. ms(now), '(+inf')
end

-- Lets the key expire with its last live holder (none left: deleted).
local function holders_expire(key)
  local last = redis.call('ZREVRANGEBYSCORE', key, '(+inf', '(0', 'WITHSCORES', 'LIMIT', 0, 1)
  if last[2] then
    redis.call('PEXPIREAT', key, last[2])
  else
    redis.call('DEL', key)
  end
end

-- Adds (or keeps) `value` as a holder until master time `untl`, never shortening its hold.
local function holders_add(key, value, untl)
  redis.call('ZADD', key, '+inf', 'redquorum')
  redis.call('ZADD', key, 'GT', ms(untl), value)
  holders_expire(key)
end

-- Milliseconds until the earliest (`first`) or the latest live holder's hold runs out (a
-- refusal's answer: when a waiter may try again); -2 with none.
local function holders_left(key, now, first)
  local found
  if first then
    found = redis.call('ZRANGEBYSCORE', key, '(' .. ms(now), '(+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  else
    found = redis.call('ZREVRANGEBYSCORE', key, '(+inf', '(' .. ms(now), 'WITHSCORES', 'LIMIT', 0, 1)
  end
  if found[2] then
    return tonumber(found[2]) - now
  end
  return -2
end

-- True when `value` holds, with a hold that has not run out.
local function holders_has(key, value, now)
  local score = tonumber(redis.call('ZSCORE', key, value) or '0')
  return score ~= nil and score > now and score ~= math.huge
end

-- The acquire scripts' shared blocks (acquire.lua, rw_acquire.lua, sem_acquire.lua).

-- The keys after a one-resource acquire's own, from KEYS[first]: the fence counter when
-- fenced, then the epoch marker and the ttl records when guarded (nil where absent: the
-- records may be left out).
local function acquire_extra_keys(first, fenced, guarded)
  local fence, marker, records = nil, nil, nil
  local next_key = first
  if fenced then
    fence = KEYS[first]
    next_key = first + 1
  end
  if guarded then
    marker, records = KEYS[next_key], KEYS[next_key + 1]
  end
  return fence, marker, records
end

-- Before an acquire writes anything: the REDQUORUM_FOREIGN reply for the first of
-- redquorum's own keys that holds data redquorum did not write, else nil. Each argument may
-- be nil (or false): a key the acquire does not use.
local function acquire_foreign(holders, fence, marker, records)
  if holders and not holders_owned(holders) then
    return foreign(holders)
  end
  if fence and not owned(fence, 'fence') then
    return foreign(fence)
  end
  if marker and not owned(marker, 'guard') then
    return foreign(marker)
  end
  if records and not owned(records, 'ttls') then
    return foreign(records)
  end
  return nil
end

-- Increments the fence counter `fence`, kept `keep` ms when idle (0 = forever): its new
-- value.
local function fence_increment(fence, keep)
  local token = redis.call('HINCRBY', fence, 'token', 1)
  redis.call('HSET', fence, 'redquorum', 'fence')
  keep = tonumber(keep)
  if keep > 0 then
    redis.call('PEXPIRE', fence, keep)
  end
  return token
end

-- A grant's reply: {1, token, epoch}, epoch the marker's (false without a marker: not
-- guarded).
local function acquire_granted(token, marker)
  local epoch = false
  if marker then
    epoch = redis.call('HGET', marker, 'epoch')
  end
  return {1, token, epoch}
end
