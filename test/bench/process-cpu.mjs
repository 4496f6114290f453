// CPU and memory of the processes a bench starts, read from /proc (Linux).
import { readdirSync, readFileSync } from "node:fs"

/** Peak resident set size (VmHWM) of a live process, in MB. */
export const peakRssMb = (pid) => {
  const match = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmHWM:\s+(\d+) kB/)
  return match ? Number(match[1]) / 1024 : NaN
}

/** CPU time (user + system) a process has used so far, in ms. */
export const cpuMs = (pid) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return 0
  }
}
/** CPU time of each Postgres process on this machine, in ms, by pid. */
const postgresCpuMs = () =>
  new Map(
    readdirSync("/proc")
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "postgres"
        } catch {
          return false
        }
      })
      .map((pid) => [pid, cpuMs(pid)])
  )

/** CPU Postgres spent between two samples: backends that ended in between count from what they had. */
const postgresCpuSince = (before) => {
  let total = 0
  for (const [pid, ms] of postgresCpuMs()) total += ms - (before.get(pid) ?? 0)
  return total
}

/** Runs a load and reports the CPU each named process spent per request during it. */
export const measured = async (run, pids) => {
  const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMs(pid)]))
  const pgBefore = postgresCpuMs()
  const result = await run()
  const perRequest = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, ((cpuMs(pid) - before[name]) * 1000) / result.total]))
  perRequest.postgres = (postgresCpuSince(pgBefore) * 1000) / result.total
  return { ...result, cpuUsPerRequest: perRequest }
}
