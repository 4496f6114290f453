// Types for machine.mjs, which the JS benches import as it is and the TS benches through these.
export declare const pageFaultUs: () => number
export declare const postgresLoginMs: (url: string) => Promise<number>
export declare const machineNow: (url: string) => Promise<string>
