-- The span a lease's holder last asked for (Lease.TTL), in nanoseconds: a
-- renewal on the holder's behalf (tool use as a heartbeat) extends by it,
-- never by more. 0 on rows written before it was recorded.
ALTER TABLE leases ADD COLUMN ttl INTEGER NOT NULL DEFAULT 0;
