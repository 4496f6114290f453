// What this machine's hour costs, printed beside a bench's figures: the same commit reads up to
// 2–3× apart between hours on these VMs, and the guest's page faults (dear here: see
// test/bench/README.md) and a Postgres backend's start, mostly page faults, are the costs first
// suspected of moving with it.
import { performance } from "node:perf_hooks"
import pg from "pg"
import { processStat } from "./process-cpu.mjs"

const minorFaults = () => processStat(process.pid)?.minorFaults ?? NaN
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

/** µs per minor page fault: fresh 16 MB (malloc hands it over untouched) written once, less the same write on touched memory. */
export const pageFaultUs = () => {
  const rounds = []
  for (let i = 0; i < 5; i++) {
    const buffer = Buffer.allocUnsafeSlow(16 * 2 ** 20)
    const faults = minorFaults()
    const first = performance.now()
    buffer.fill(1)
    const touched = performance.now() - first
    const faulted = minorFaults() - faults
    const again = performance.now()
    buffer.fill(2)
    const rewrite = performance.now() - again
    if (faulted > 0) rounds.push(((touched - rewrite) * 1000) / faulted)
  }
  return rounds.length > 0 ? median(rounds) : NaN
}

/** ms from connect to the first answer on a new session of the Postgres at `url` (no TLS), median of 10. */
export const postgresLoginMs = async (url) => {
  const logins = []
  for (let i = 0; i < 10; i++) {
    const started = performance.now()
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query("select 1")
    logins.push(performance.now() - started)
    await client.end()
  }
  return median(logins)
}

/** One line: the machine's page fault and Postgres login costs now (test/bench/README.md, "The machine's hour"). */
export const machineNow = async (url) =>
  `this machine now: a page fault ${pageFaultUs().toFixed(1)} µs, a Postgres login ${(await postgresLoginMs(url)).toFixed(1)} ms (see "The machine's hour" in test/bench/README.md)`
