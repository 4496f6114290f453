import { Code, ConnectError } from "@connectrpc/connect"
import { create } from "@bufbuild/protobuf"
import { ErrorInfoSchema, type Reason } from "@scion/proto/scion/errors/v1/errors_pb"
import { Schema } from "effect"

/**
 * A reason a unit may send: a name of `scion.errors.v1.Reason` (without its prefix). Units' error
 * tables and the gateway's status table are typed by it, so the proto enum is the one list.
 */
export type ReasonName = Exclude<keyof typeof Reason, "UNSPECIFIED">

/**
 * What a domain error becomes on the wire: a Connect code and an UPPER_SNAKE reason, plus every
 * variable of the message in metadata (AIP-193).
 */
export interface WireError {
  readonly code: Code
  readonly reason: ReasonName
  readonly message: string
  readonly metadata?: Record<string, string>
}

export const toConnectError = (error: WireError): ConnectError =>
  new ConnectError(error.message, error.code, undefined, [
    { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason: error.reason, domain: "scion", metadata: error.metadata ?? {} }) }
  ])

/** A failed call to another unit, as the caller sees it: code name, reason and message. */
export class RpcError extends Schema.TaggedError<RpcError>()("RpcError", {
  code: Schema.Number,
  reason: Schema.String,
  message: Schema.String,
  metadata: Schema.Record({ key: Schema.String, value: Schema.String })
}) {
  get codeName(): string {
    return Code[this.code] ?? "Unknown"
  }
}

/** Whether a failed call carries `reason` (a peer may send any string; we compare with known names). */
export const hasReason = (error: Pick<RpcError, "reason">, reason: ReasonName): boolean => error.reason === reason

export const fromConnectError = (cause: unknown): RpcError => {
  const error = ConnectError.from(cause)
  const info = error.findDetails(ErrorInfoSchema)[0]
  return new RpcError({
    code: error.code,
    reason: info?.reason ?? "",
    message: error.rawMessage,
    metadata: { ...(info?.metadata ?? {}) }
  })
}

export { Code }

/** One row of a unit's closed error table: the Connect code, the reason, the message's variables. */
export type WireEntry<E> = {
  readonly code: Code
  readonly reason: ReasonName
  /** Every variable of the message (AIP-193). */
  metadata?(error: E): Record<string, string>
}

/** A unit's closed table from each domain error tag to its wire form, checked by the type system. */
export type WireTable<E extends { readonly _tag: string }> = { readonly [K in E["_tag"]]: WireEntry<Extract<E, { _tag: K }>> }

/** Looks a domain error up in its unit's table (the `toWire` argument of `effectService`). */
export const wireErrorFrom =
  <E extends { readonly _tag: string; readonly message: string }>(table: WireTable<E>) =>
  (error: E): WireError => {
    const entry = table[error._tag as E["_tag"]] as WireEntry<E>
    return { code: entry.code, reason: entry.reason, message: error.message, ...(entry.metadata ? { metadata: entry.metadata(error) } : {}) }
  }
