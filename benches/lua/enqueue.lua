-- Seed 000's createOrUpdateGradingJob as one Lua script on native keys, the
-- way Lua-based queues do it (benchmark baseline for ORCA.ENQUEUE).
--
--   EVALSHA <sha> 1 <ns> <config-json>
--
-- Keys (all under the namespace KEYS[1], e.g. "{n}", a hash tag):
--   <ns>:Reservations                   ZSET  "<type>.<id>.<nonce>" | "immediate.<orca-key>" -> release time
--   <ns>:SubmitterInfo.<type>.<id>      LIST  orca keys, most recent first (LPUSH / LPOP)
--   <ns>:Nonces.<type>.<id>             SET   nonces in use by the collation
--   <ns>:job:<orca-key>                 STRING the config JSON
-- The orca key is sha1hex(key .. response_url): Redis's Lua has no sha256
-- (a real Lua queue would take the key from the client).
-- Reply: {orca-key, release-time} (release time 0 when the job existed).
local ns = KEYS[1]
local cfg = cjson.decode(ARGV[1])
if type(cfg) ~= 'table' or type(cfg.key) ~= 'string' then
  return redis.error_reply('ERR config has no string field key')
end
local url = cfg.response_url
if type(url) ~= 'string' then url = '' end
local orca = redis.sha1hex(cfg.key .. url)
local jobkey = ns .. ':job:' .. orca
if redis.call('EXISTS', jobkey) == 1 then
  -- update: payload replaced, position kept
  redis.call('SET', jobkey, ARGV[1])
  return {orca, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local priority = tonumber(cfg.priority) or 0
local release = now + priority
local coll = cfg.collation
if type(coll) == 'table' and coll.type and coll.id then
  local task = coll.type .. '.' .. tostring(coll.id)
  local nonces = ns .. ':Nonces.' .. task
  -- generateNonce: the release time, incremented while taken
  local nonce = release
  while redis.call('SISMEMBER', nonces, nonce) == 1 do nonce = nonce + 1 end
  redis.call('LPUSH', ns .. ':SubmitterInfo.' .. task, orca)
  redis.call('ZADD', ns .. ':Reservations', release, task .. '.' .. nonce)
  redis.call('SADD', nonces, nonce)
else
  redis.call('ZADD', ns .. ':Reservations', release, 'immediate.' .. orca)
end
redis.call('SET', jobkey, ARGV[1])
return {orca, release}
