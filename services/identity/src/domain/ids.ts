import { makeId } from "@scion/kit"

/** Opaque, prefixed, time-sortable ids (ARCHITECTURE.md, "Choices where the interface is silent"). */
export const Ids = {
  user: makeId("usr"),
  session: makeId("ses"),
  emailVerification: makeId("evf"),
  org: makeId("org"),
  roleGrant: makeId("grt"),
  invite: makeId("inv"),
  apiKey: makeId("key"),
  project: makeId("prj")
} as const
