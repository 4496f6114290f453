// Connects to a connection URL exactly as given, the way an application would, and runs one
// parameterised query: `node driver-probe.mjs <pg|postgres> <url>` prints {"n": 42} or exits 1 with
// the driver's error. The e2e tests run it as its own process, so NODE_EXTRA_CA_CERTS applies as
// it does for users (Node reads it at start).
import pg from "pg"
import postgres from "postgres"

const [driver, url] = process.argv.slice(2)

const viaNodePostgres = async () => {
  const pool = new pg.Pool({ connectionString: url, max: 1 })
  try {
    const { rows } = await pool.query("select $1::int + 1 as n", [41])
    return rows[0].n
  } finally {
    await pool.end()
  }
}

const viaPostgresJs = async () => {
  const sql = postgres(url, { max: 1, onnotice: () => undefined })
  try {
    const value = 41
    const [row] = await sql`select ${value}::int + 1 as n`
    return row.n
  } finally {
    await sql.end()
  }
}

try {
  const n = driver === "pg" ? await viaNodePostgres() : driver === "postgres" ? await viaPostgresJs() : Promise.reject(new Error(`unknown driver ${driver}`))
  process.stdout.write(JSON.stringify({ n }) + "\n")
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(1)
}
