import { Effect, Option } from "effect"
import { publicationName } from "../connectors/GrantScript.js"
import { activePipelineRow } from "./PipelinesRepo.js"

/** The database on every engine that holds the mirror; branches are template copies of it. */
export const MIRROR_DATABASE = "mirror"

/** The names Scion uses for a connector on the source and the engine: one per connector. */
export const replicationNames = (connectorId: string) => {
  const name = publicationName(connectorId)
  return { publication: name, slot: name, subscription: name }
}

/**
 * A pipeline: publication and slot on the source, a mirror database and its subscription on the
 * engine. The connector's first is named after it (`scion_<id>`, database `mirror`); a deep reset
 * builds generation n beside it (`scion_<id>_g<n>`, `mirror_g<n>`).
 */
export interface PipelineNames {
  readonly publication: string
  readonly slot: string
  readonly subscription: string
  readonly mirrorDatabase: string
}

export const pipelineNames = (connectorId: string, generation: number): PipelineNames => {
  const base = replicationNames(connectorId)
  if (generation <= 1) return { ...base, mirrorDatabase: MIRROR_DATABASE }
  const suffix = `_g${generation}`
  const name = `${base.publication.slice(0, 63 - suffix.length)}${suffix}`
  return { publication: name, slot: name, subscription: name, mirrorDatabase: `${MIRROR_DATABASE}${suffix}` }
}

/** The pipeline branches are cut from: the engine record's, or the first one before any. */
export const activePipeline = (connectorId: string) =>
  Effect.map(
    activePipelineRow(connectorId),
    Option.match({
      onNone: (): PipelineNames => pipelineNames(connectorId, 1),
      onSome: (row): PipelineNames => ({ publication: row.publication_name, slot: row.slot_name, subscription: row.subscription_name, mirrorDatabase: row.mirror_database })
    })
  )
