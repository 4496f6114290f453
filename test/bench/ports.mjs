import { createServer } from "node:net"

/**
 * `count` distinct free ports: all held open at once while they are picked. One at a time, the
 * kernel may hand a port closed a moment ago out again, and two units of a bench were started on
 * the same port (the gateway then could not listen).
 */
export const freePorts = async (count) => {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise((resolve, reject) => {
          const server = createServer()
          server.once("error", reject)
          server.listen(0, "127.0.0.1", () => resolve(server))
        })
    )
  )
  const ports = servers.map((server) => server.address().port)
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  return ports
}
