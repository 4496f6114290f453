/** Types of production-shape.mjs for the TypeScript tests that start their systems through it. */
export interface Secrets {
  readonly signingKey: string
  readonly serviceCredential: string
  readonly secretKeys: string
}
export interface Ports {
  readonly gateway: number
  readonly gatewayHealth: number
  readonly identity: number
  readonly operation: ReadonlyArray<number>
  readonly billing: number
  readonly connector: number
  readonly branch: number
}
export interface ShapeUnit {
  readonly name: string
  readonly script: string
  readonly env: Record<string, string>
}
export declare const repoRoot: string
export declare const UNIT_NODE_FLAGS: ReadonlyArray<string>
export declare const makeSecrets: () => Secrets
export declare const portsFrom: (base: number | undefined) => Ports
export declare const productionShape: (options: {
  readonly ports: Ports
  readonly host?: string
  readonly databaseUrl: string
  readonly natsUrl: string
  readonly busNamespace?: string | undefined
  readonly secrets: Secrets
  readonly engineDataDir: string
  readonly env?: Record<string, string>
  readonly operationEnv?: Record<string, string>
  readonly unitEnv?: Record<string, Record<string, string>>
}) => Array<ShapeUnit>
export declare const healthStatus: (baseUrl: string) => Promise<"SERVING" | "NOT_SERVING" | "unreachable">
export declare const healthServing: (baseUrl: string) => Promise<boolean>
export declare const allServing: (units: ReadonlyArray<ShapeUnit>) => Promise<boolean>
