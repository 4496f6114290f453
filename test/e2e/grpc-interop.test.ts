/**
 * Other teams call units with plain gRPC clients: @grpc/grpc-js, no Connect, messages encoded
 * with the generated descriptors.
 */
import * as grpc from "@grpc/grpc-js"
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf"
import { HealthCheckRequestSchema, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus } from "@scion/proto/grpc/health/v1/health_pb"
import { AuthenticateRequestSchema, AuthenticateResponseSchema, SignUpRequestSchema, SignUpResponseSchema } from "@scion/proto/scion/auth/v1/auth_pb"
import { GetMeRequestSchema, GetMeResponseSchema } from "@scion/proto/scion/identity/v1/identity_pb"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startScion, type Scion } from "../support/system.js"

let scion: Scion
let client: grpc.Client
beforeAll(async () => {
  scion = await startScion()
  client = new grpc.Client(new URL(scion.identityUrl).host, grpc.credentials.createInsecure())
})
afterAll(async () => {
  client?.close()
  await scion?.stop()
})

const unary = <I extends DescMessage, O extends DescMessage>(
  path: string,
  input: I,
  output: O,
  request: MessageInitShape<I>,
  metadata = new grpc.Metadata()
): Promise<MessageShape<O>> =>
  new Promise((resolve, reject) =>
    client.makeUnaryRequest(
      path,
      (message: MessageShape<I>) => Buffer.from(toBinary(input, message)),
      (bytes: Buffer) => fromBinary(output, bytes),
      create(input, request),
      metadata,
      (error, response) => (error ? reject(error) : resolve(response!))
    )
  )

describe("gRPC interop", () => {
  it("answers the standard health check", async () => {
    const health = await unary("/grpc.health.v1.Health/Check", HealthCheckRequestSchema, HealthCheckResponseSchema, { service: "" })
    expect(health.status).toBe(HealthCheckResponse_ServingStatus.SERVING)
  })

  it("serves identity RPCs to a plain grpc-js client, principal in metadata", async () => {
    const email = `grpc-${Date.now()}@example.com`
    const signUp = await unary("/scion.auth.v1.AuthService/SignUp", SignUpRequestSchema, SignUpResponseSchema, { email, password: "correct-horse-battery", fullName: "Grpc" })
    expect(signUp.session?.user?.email).toBe(email)
    const auth = await unary("/scion.auth.v1.AuthService/Authenticate", AuthenticateRequestSchema, AuthenticateResponseSchema, { bearerToken: signUp.session!.sessionToken })
    expect(auth.principalToken.length).toBeGreaterThan(0)
    const metadata = new grpc.Metadata()
    metadata.set("x-scion-principal", auth.principalToken)
    const me = await unary("/scion.identity.v1.IdentityService/GetMe", GetMeRequestSchema, GetMeResponseSchema, {}, metadata)
    expect(me.user?.email).toBe(email)
    expect(me.hasOrgs).toBe(false)
  })

  it("returns gRPC status codes: UNAUTHENTICATED without a principal, and for a forged one", async () => {
    await expect(unary("/scion.identity.v1.IdentityService/GetMe", GetMeRequestSchema, GetMeResponseSchema, {})).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED })
    const forged = new grpc.Metadata()
    forged.set("x-scion-principal", "v1.key.eyJ9.c2ln")
    await expect(unary("/scion.identity.v1.IdentityService/GetMe", GetMeRequestSchema, GetMeResponseSchema, {}, forged)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED })
  })
})
