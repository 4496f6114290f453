import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Redacted } from "effect"
import { engineNamesOf, fingerprintOf, parseKeys, Passwords, urlsOf, validateCreate, validateMaskingRules } from "../src/index.js"

const input = { connectorId: "con_1", name: "feature-1", serviceType: "postgres", idempotencyKey: undefined }
const fail = (i: Parameters<typeof validateCreate>[0]) => Effect.runSync(Effect.flip(validateCreate(i)))

describe("create validation", () => {
  it("names the missing field and says to use postgres", () => {
    expect(fail({ ...input, connectorId: "" }).message).toBe("connector_id is required")
    expect(fail({ ...input, name: "  " }).message).toBe("name is required")
    expect(fail({ ...input, serviceType: "" }).message).toBe("service_type is required")
    expect(fail({ ...input, serviceType: "postgresql" }).message).toMatch(/"postgres", not "postgresql"/)
    expect(fail({ ...input, serviceType: "mysql" }).message).toMatch(/not supported/)
  })

  it("accepts 1..63 of [a-z0-9_-] starting with a letter or digit", () => {
    for (const name of ["a", "0-x", "feature_1", "x".repeat(63)]) expect(Either.isRight(Effect.runSync(Effect.either(validateCreate({ ...input, name }))))).toBe(true)
    for (const name of ["-a", "A", "a b", "x".repeat(64), "ü"]) expect(fail({ ...input, name })._tag).toBe("InvalidArgument")
    expect(fail({ ...input, idempotencyKey: "" })._tag).toBe("InvalidArgument")
    expect(fail({ ...input, idempotencyKey: "x".repeat(256) })._tag).toBe("InvalidArgument")
  })

  it("binds a key to connector, service type and name", () => {
    const base = { connectorId: "a", serviceType: "postgres", name: "b" }
    expect(fingerprintOf({ ...base })).toBe(fingerprintOf(base))
    expect(fingerprintOf({ ...base, name: "c" })).not.toBe(fingerprintOf(base))
    expect(fingerprintOf({ ...base, connectorId: "z" })).not.toBe(fingerprintOf(base))
    expect(fingerprintOf({ ...base, serviceType: "mysql" })).not.toBe(fingerprintOf(base))
    // Fields do not run into each other: moving characters between them changes the fingerprint.
    expect(fingerprintOf({ connectorId: "ab", serviceType: "postgres", name: "c" })).not.toBe(fingerprintOf({ connectorId: "a", serviceType: "postgres", name: "bc" }))
    expect(fingerprintOf({ connectorId: "a", serviceType: "postgresb", name: "" })).not.toBe(fingerprintOf({ connectorId: "a", serviceType: "postgres", name: "b" }))
  })
})

describe("URLs", () => {
  const names = engineNamesOf("br_01abc")
  const branch = { ...names, engineHost: "10.0.0.5", enginePort: 5433, poolerHost: null, poolerPort: null }

  it("builds branch_url with TLS required and channel binding off; no pooled URLs without a PgBouncer", () => {
    expect(urlsOf(branch, "p/w@d")).toEqual({
      branchUrl: "postgresql://scion_br_01abc_owner:p%2Fw%40d@10.0.0.5:5433/scion_br_01abc?sslmode=require&channel_binding=disable",
      pooledBranchUrl: null,
      pooledBranchPrismaUrl: null
    })
  })

  it("adds the pooled and Prisma URLs behind a PgBouncer", () => {
    const urls = urlsOf({ ...branch, poolerHost: "10.0.0.6", poolerPort: 6432 }, "pw")
    expect(urls.pooledBranchUrl).toBe("postgresql://scion_br_01abc_owner:pw@10.0.0.6:6432/scion_br_01abc?sslmode=require&channel_binding=disable")
    expect(urls.pooledBranchPrismaUrl).toBe(`${urls.pooledBranchUrl}&pgbouncer=true&connection_limit=1`)
  })

  it("never builds a URL without an address or a password", () => {
    expect(urlsOf({ ...branch, engineHost: null }, "pw").branchUrl).toBeNull()
    expect(urlsOf(branch, "").branchUrl).toBeNull()
  })
})

describe("secrets", () => {
  it("seals passwords bound to their branch", async () => {
    const keys = parseKeys(`k1:${Buffer.alloc(32, 7).toString("base64")}`)
    if (typeof keys === "string") throw new Error(keys)
    const passwords = Passwords.make(keys, "k1")
    const sealed = await Effect.runPromise(passwords.seal(Redacted.make("pw"), "br_1"))
    expect(JSON.stringify(sealed)).not.toContain("pw\"")
    expect(Redacted.value(await Effect.runPromise(passwords.open(sealed, "br_1")))).toBe("pw")
    expect((await Effect.runPromise(Effect.flip(passwords.open(sealed, "br_2"))))._tag).toBe("SecretStoreFailure")
    expect(typeof parseKeys("k1:short")).toBe("string")
  })
})

describe("masking rules", () => {
  it("refuses unknown methods and repeated columns", () => {
    const rule = { schema: "public", table: "t", column: "c", method: "hash" }
    expect(Effect.runSync(validateMaskingRules([rule]))).toEqual([rule])
    expect(Effect.runSync(Effect.flip(validateMaskingRules([{ ...rule, method: "rot13" }]))).message).toMatch(/method must be one of/)
    expect(Effect.runSync(Effect.flip(validateMaskingRules([rule, rule]))).message).toMatch(/repeats/)
  })
})
