/** SIGTERM drains and exits cleanly: health turns NOT_SERVING, servers close, exit code 0. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signUp, startScion, type Scion } from "../support/system.js"

let scion: Scion
beforeAll(async () => {
  scion = await startScion()
})
afterAll(async () => {
  await scion?.stop()
})

describe("graceful shutdown", () => {
  it("gateway and identity exit 0 on SIGTERM within the grace period", async () => {
    await signUp(scion, "before-shutdown")
    const started = Date.now()
    expect(await scion.gateway.stop("SIGTERM")).toBe(0)
    expect(await scion.identity.stop("SIGTERM")).toBe(0)
    expect(Date.now() - started).toBeLessThan(10_000)
  })
})
