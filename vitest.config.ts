import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["services/*/test/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // End-to-end files start their own processes; a little parallelism is all 2 cores afford.
    maxWorkers: 2,
    minWorkers: 1,
    // CI reads its totals from the JSON report.
    reporters: process.env.CI ? ["default", ["json", { outputFile: "test-results/vitest.json" }]] : ["default"]
  }
})
