import { group } from "../serve/handlers.js"
import { Effect } from "effect"
import { Api } from "../Api.js"
import { anonymously } from "../Authentication.js"

/** GET /v1/engines/ca-certificate: public, the PEM the connector unit's engines chain to. */
export const EnginesLive = group(Api, "engines", (handlers) =>
  handlers.handle("certificateAuthority", () =>
    anonymously((u) => u.connectors.getEngineCertificateAuthority({})).pipe(Effect.map((r) => r.certificatePem))
  )
)
