#!/usr/bin/env node
// The benchmark's baseline: one plain Node HTTP server that authenticates an org API key by its
// SHA-256 digest in Postgres and returns the org, the least work the same read can cost.
import { createHash } from "node:crypto"
import { createServer } from "node:http"
import pg from "pg"

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 })
const query = `
  select o.id, o.name, o.created_at, r.role_key, r.permissions,
         (select count(*)::int from identity.memberships m where m.org_id = o.id) as member_count
    from identity.api_keys k
    join identity.orgs o on o.id = k.org_id
    join identity.role_grants g on g.api_key_id = k.id
    join identity.roles r on r.id = g.role_id
   where k.secret_digest = $1 and k.revoked_at is null and (k.expires_at is null or k.expires_at > now())`

createServer(async (req, res) => {
  const token = (req.headers.authorization ?? "").replace(/^Bearer /, "")
  const digest = createHash("sha256").update(token).digest("hex")
  const { rows } = await pool.query(query, [digest])
  const org = rows[0]
  if (!org || !req.url?.endsWith(org.id)) {
    res.writeHead(401).end()
    return
  }
  res.writeHead(200, { "content-type": "application/json" })
  res.end(JSON.stringify({ org_id: org.id, name: org.name, created_at: org.created_at, my_role: org.role_key, my_permissions: org.permissions, member_count: org.member_count }))
}).listen(Number(process.env.PORT), "127.0.0.1")
