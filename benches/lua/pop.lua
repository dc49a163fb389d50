-- Seed 000's getNextJob as one Lua script on native keys (benchmark baseline
-- for ORCA.POP ... LEASE 0: the job is removed, at-most-once).
--
--   EVALSHA <sha> 1 <ns>
--
-- Layout: see enqueue.lua. Reply: {orca-key, payload, release-time}, or nil.
local ns = KEYS[1]
local r = redis.call('ZPOPMIN', ns .. ':Reservations')
if #r == 0 then return false end
local member = r[1]
local orca
if string.sub(member, 1, 10) == 'immediate.' then
  orca = string.sub(member, 11)
else
  local task, nonce = string.match(member, '^(.*)%.([^.]+)$')
  redis.call('SREM', ns .. ':Nonces.' .. task, nonce)
  orca = redis.call('LPOP', ns .. ':SubmitterInfo.' .. task)
end
local payload = redis.call('GETDEL', ns .. ':job:' .. orca)
return {orca, payload, r[2]}
