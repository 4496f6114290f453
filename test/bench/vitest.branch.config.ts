import { defineConfig } from "vitest/config"

// pnpm bench:branch runs test/bench/branch.bench.ts alone (not part of `npm test`), printing as it goes.
export default defineConfig({
  test: {
    include: ["test/bench/branch.bench.ts"],
    testTimeout: 3_600_000,
    hookTimeout: 600_000,
    disableConsoleIntercept: true,
    reporters: ["default"]
  }
})
