// Types for process-cpu.mjs, which the JS benches import as it is and the TS benches through these.
export interface ProcessStat {
  readonly pid: number
  readonly ppid: number
  readonly comm: string
  /** CPU (user + system) the process used so far, ms. */
  readonly self: number
  /** Minor page faults the process took so far. */
  readonly minorFaults: number
  /** CPU of the children it reaped so far, ms. */
  readonly reaped: number
  readonly args: string
}
export declare const processStat: (pid: number | string) => ProcessStat | undefined
export declare const allProcesses: () => Array<ProcessStat>
export declare const machineCpu: () => { readonly busy: number; readonly iowait: number; readonly total: number }
export declare const cpuMs: (pid: number | string) => number
export declare const peakRssMb: (pid: number) => number
export declare const measured: <R extends { readonly total: number }>(
  run: () => Promise<R>,
  pids: Record<string, number | undefined>
) => Promise<R & { readonly cpuUsPerRequest: Record<string, number> }>
export declare const cpuInWindows: (pids: Record<string, number | undefined>) => {
  readonly start: () => void
  readonly stop: () => void
  readonly spent: Record<string, number>
  readonly windows: () => number
}
