import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeId, prometheusText, recordHttp, recordRpc } from "../src/index.js"

/** The value of one series in the exposition, 0 when absent. */
const valueOf = (text: string, series: string) => Number(text.split("\n").find((line) => line.startsWith(`${series} `))?.split(" ")[1] ?? 0)

describe("ids", () => {
  it.effect("are prefixed, time-ordered and distinct across many draws of the random pool", () =>
    Effect.gen(function* () {
      // 1,000 ids draw 16 KB: the 4 KiB pool is refilled several times.
      const ids = yield* Effect.all(Array.from({ length: 1000 }, () => makeId("req")))
      expect(new Set(ids).size).toBe(1000)
      for (const id of ids) expect(id).toMatch(/^req_[0-9a-hjkmnp-tv-z]{26}$/)
      expect([...ids].sort()[0]!.slice(0, 14)).toBe(ids[0]!.slice(0, 14))
    }))
})

describe("request metrics", () => {
  it.effect("count every request and RPC of a label set, and keep label sets apart", () =>
    Effect.gen(function* () {
      const route = `/v1/test/${Math.random().toString(36).slice(2)}`
      for (let i = 0; i < 3; i++) yield* recordHttp("GET", route, 200, 0.002)
      yield* recordHttp("GET", route, 404, 0.001)
      yield* recordRpc("scion.test.v1.TestService", route, "OK", 0.001)
      yield* recordRpc("scion.test.v1.TestService", route, "OK", 0.001)
      const text = yield* prometheusText
      expect(valueOf(text, `scion_http_requests_total{method="GET",route="${route}",status="200"}`)).toBe(3)
      expect(valueOf(text, `scion_http_requests_total{method="GET",route="${route}",status="404"}`)).toBe(1)
      expect(valueOf(text, `scion_rpc_server_requests_total{service="scion.test.v1.TestService",method="${route}",code="OK"}`)).toBe(2)
      expect(valueOf(text, `scion_http_request_duration_seconds_count{method="GET",route="${route}"}`)).toBe(4)
    }))
})
