// CPU and memory of the processes a bench starts, read from /proc (Linux).
import { readdirSync, readFileSync } from "node:fs"

/** Peak resident set size (VmHWM) of a live process, in MB. */
export const peakRssMb = (pid) => {
  const match = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmHWM:\s+(\d+) kB/)
  return match ? Number(match[1]) / 1024 : NaN
}

/**
 * One process as /proc/<pid>/stat and cmdline show it: parent, command, its own CPU (user + system),
 * its minor page faults so far, and the CPU of its children it reaped (an ended Postgres backend's, counted by its postmaster), in
 * ms (ticks of 10 ms). Undefined when the process is gone.
 */
export const processStat = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number)
    return {
      pid: Number(pid),
      ppid: fields[1],
      comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
      self: (fields[11] + fields[12]) * 10,
      minorFaults: fields[7],
      reaped: (fields[13] + fields[14]) * 10,
      args: readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")
    }
  } catch {
    return undefined
  }
}

/** Every process on this machine (processStat), those that end while listed left out. */
export const allProcesses = () =>
  readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(processStat)
    .filter((p) => p !== undefined)

/** The machine's CPU time so far, all cores (/proc/stat, ticks of 10 ms): busy, waiting on I/O, and in all, in ms. */
export const machineCpu = () => {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number)
  const busy = user + nice + system + irq + softirq
  return { busy: busy * 10, iowait: iowait * 10, total: (busy + idle + iowait + steal) * 10 }
}

/** CPU time (user + system) a process has used so far, in ms. */
export const cpuMs = (pid) => processStat(pid)?.self ?? 0
/** CPU time of each Postgres process on this machine, in ms, by pid. */
const postgresCpuMs = () => new Map(allProcesses().filter((p) => p.comm === "postgres").map((p) => [p.pid, p.self]))

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

/**
 * CPU the named processes and Postgres spend inside windows a bench marks (start, stop), summed
 * over every window, in ms. Postgres is read outside the named processes' readings, so the scan
 * of /proc is not counted against the bench client.
 */
export const cpuInWindows = (pids) => {
  const spent = { ...Object.fromEntries(Object.keys(pids).map((name) => [name, 0])), postgres: 0 }
  let windows = 0
  let before
  return {
    start: () => {
      const postgres = postgresCpuMs()
      before = { postgres, own: Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMs(pid)])) }
    },
    stop: () => {
      for (const [name, pid] of Object.entries(pids)) spent[name] += cpuMs(pid) - before.own[name]
      spent.postgres += postgresCpuSince(before.postgres)
      windows++
    },
    spent,
    /** How many windows were closed so far. */
    windows: () => windows
  }
}
