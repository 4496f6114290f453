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
  it("gateway and identity exit 0 on SIGTERM, by themselves", async () => {
    await signUp(scion, "before-shutdown")
    // stop() only signals and waits for the exit (no SIGKILL after it): a unit that did not finish
    // its shutdown never resolves and the test's timeout fails it; one killed or crashed is not 0.
    expect(await scion.gateway.stop("SIGTERM")).toBe(0)
    expect(await scion.identity.stop("SIGTERM")).toBe(0)
  })
})
