import { defineConfig } from "vitest/config"

// pnpm bench:schema-change runs test/bench/schema-change.bench.ts alone (not part of `npm test`), printing as it goes.
export default defineConfig({
  test: {
    include: ["test/bench/schema-change.bench.ts"],
    testTimeout: 3_600_000,
    hookTimeout: 600_000,
    fileParallelism: false,
    disableConsoleIntercept: true,
    reporters: ["default"]
  }
})
