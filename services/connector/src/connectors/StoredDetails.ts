import { Effect, Option, Redacted, Schema } from "effect"
import { SecretStore } from "../secrets/SecretStore.js"
import { PostgresDetails } from "./ConnectionDetails.js"
import { connectorSecretAad } from "./Connectors.js"
import { ConnectorsRepo } from "./ConnectorsRepo.js"

/** The stored connection details cannot be used; `reason` says why and never carries a value. */
export class StoredDetailsUnusable extends Schema.TaggedError<StoredDetailsUnusable>()("StoredDetailsUnusable", { reason: Schema.String }) {
  override get message() {
    return this.reason
  }
}

const decodeDetails = Schema.decodeUnknownEither(Schema.parseJson(PostgresDetails))

/**
 * A PostgreSQL connector's details from the secret store: the envelope read, decrypted with the
 * connector as associated data, and decoded (defaults filled in). Every job and check that logs
 * in to the source starts here.
 */
export const storedPostgresDetails = (connectorId: string) =>
  Effect.gen(function* () {
    const repo = yield* ConnectorsRepo
    const secrets = yield* SecretStore
    const envelope = yield* repo.getDetails(connectorId)
    if (Option.isNone(envelope)) return yield* new StoredDetailsUnusable({ reason: "no connection details are stored" })
    const plaintext = yield* secrets
      .decrypt(envelope.value, connectorSecretAad(connectorId))
      .pipe(Effect.mapError((e) => new StoredDetailsUnusable({ reason: `the stored credentials cannot be decrypted (${e.reason})` })))
    const decoded = decodeDetails(Redacted.value(plaintext))
    if (decoded._tag === "Left") return yield* new StoredDetailsUnusable({ reason: "the stored connection details are not readable" })
    return decoded.right
  }).pipe(Effect.withSpan("storedPostgresDetails", { attributes: { connectorId } }))
