import { Context, Effect, type Option, type Redacted, Schema } from "effect"

/**
 * The branching engine of one connector: a Postgres cluster that will hold the mirror of the
 * selected tables and the branches cut from it (ARCHITECTURE.md, "The branching engine").
 * Clients connect over TLS only (`sslmode=require`) with the superuser credentials; the engine's
 * certificate names its host and chains to the adapter's certificate authority when it has one.
 */
export interface Engine {
  readonly connectorId: string
  readonly host: string
  readonly port: number
  readonly superuser: {
    readonly username: string
    readonly password: Redacted.Redacted<string>
  }
  /** Where the cluster's data lives (adapter specific: a directory for the local adapter). */
  readonly dataDir: string
  readonly tls: true
  /** The instance serving the engine, as operators name it (readiness evidence's pod_name). */
  readonly instanceName?: string
  /**
   * True when the engine's storage can reflink and the server runs with file_copy_method = clone:
   * a template copy (a branch) then clones files instead of copying them.
   */
  readonly fileCopyClone?: boolean
  /** A connection pooler (PgBouncer) in front of the engine, when one is configured. */
  readonly pooler?: { readonly host: string; readonly port: number }
}

export type EngineState = "running" | "stopped"

export interface EngineStatus {
  readonly connectorId: string
  readonly state: EngineState
  readonly host: string
  readonly port: number
}

/** No engine was provisioned for the connector (or it was destroyed). */
export class EngineNotFound extends Schema.TaggedError<EngineNotFound>()("EngineNotFound", {
  connectorId: Schema.String
}) {}

/** A step of provisioning or lifecycle failed. `message` never carries a credential. */
export class EngineError extends Schema.TaggedError<EngineError>()("EngineError", {
  connectorId: Schema.String,
  step: Schema.String,
  message: Schema.String
}) {}

/**
 * Creates, starts, stops and destroys connector engines. Every operation is idempotent per
 * connector id: provisioning twice answers the same engine (started), stopping a stopped engine
 * and destroying an absent one change nothing.
 */
export class EngineProvisioner extends Context.Tag("@scion/connector/EngineProvisioner")<
  EngineProvisioner,
  {
    /** Creates the engine if it does not exist yet, starts it if it is stopped, and answers it. */
    readonly provision: (connectorId: string) => Effect.Effect<Engine, EngineError>
    readonly start: (connectorId: string) => Effect.Effect<Engine, EngineError | EngineNotFound>
    readonly stop: (connectorId: string) => Effect.Effect<void, EngineError | EngineNotFound>
    /** Stops the engine and removes its data; an absent engine is fine. */
    readonly destroy: (connectorId: string) => Effect.Effect<void, EngineError>
    readonly status: (connectorId: string) => Effect.Effect<EngineStatus, EngineError | EngineNotFound>
    /**
     * The PEM certificate of the authority every engine's certificate chains to, for clients that
     * verify it; none when the adapter's engines have no common authority.
     */
    readonly certificateAuthority: Effect.Effect<Option.Option<string>, EngineError>
  }
>() {}

const CONNECTOR_ID = /^[A-Za-z0-9_-]{1,128}$/

/** Connector ids name directories and Kubernetes objects: only safe characters get through. */
export const validateConnectorId = (connectorId: string): Effect.Effect<void, EngineError> =>
  CONNECTOR_ID.test(connectorId)
    ? Effect.void
    : Effect.fail(new EngineError({ connectorId, step: "validate", message: "connector id must match [A-Za-z0-9_-]{1,128}" }))

/** One provisioning or lifecycle change at a time per connector in this process (adapters share it). */
export const perConnectorLock = () => {
  const locks = new Map<string, Effect.Semaphore>()
  return (connectorId: string) => {
    let lock = locks.get(connectorId)
    if (!lock) {
      lock = Effect.unsafeMakeSemaphore(1)
      locks.set(connectorId, lock)
    }
    return lock.withPermits(1)
  }
}
