/**
 * A NATS server of the test's own (JetStream, a temporary store) for tests that stop and start
 * the broker: stopping the machine's shared server would break every other test running.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort, waitFor } from "./system.js"

const binary = ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find(existsSync) ?? "nats-server"

const accepting = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1")
    socket.once("data", (chunk) => {
      socket.destroy()
      resolve(chunk.toString().startsWith("INFO"))
    })
    socket.once("error", () => resolve(false))
  })

export interface NatsServer {
  readonly url: string
  /** Stops the server (SIGTERM); the store stays for the next start. */
  readonly stop: () => Promise<void>
  /** Starts it again on the same port and store. */
  readonly start: () => Promise<void>
  /** Stops it and removes the store. */
  readonly dispose: () => Promise<void>
}

export const startNatsServer = async (): Promise<NatsServer> => {
  const port = await freePort()
  const store = mkdtempSync(join(tmpdir(), "scion-nats-"))
  let child: ChildProcess | undefined
  const start = async () => {
    child = spawn(binary, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", store], { stdio: "ignore" })
    await waitFor(`nats-server on ${port}`, () => accepting(port), 15_000)
  }
  const stop = async () => {
    const running = child
    child = undefined
    if (!running || running.exitCode !== null) return
    const exited = new Promise((resolve) => running.once("exit", resolve))
    running.kill("SIGTERM")
    await exited
  }
  await start()
  return {
    url: `nats://127.0.0.1:${port}`,
    stop,
    start,
    dispose: async () => {
      await stop()
      rmSync(store, { recursive: true, force: true })
    }
  }
}
