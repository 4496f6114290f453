import { makeId } from "@scion/kit"

/** Opaque, prefixed, time-sortable ids (ARCHITECTURE.md, "Choices where the interface is silent"). */
export const Ids = {
  environment: makeId("env"),
  awsAccountConnection: makeId("aac"),
  connector: makeId("con")
} as const
