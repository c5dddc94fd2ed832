import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Everything the tests write under the system's temp directory goes in one directory per run, removed at its end.
    globalSetup: ["test/helpers/globalTmp.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration tests each start their own nats-server and gateway on free ports;
    // two workers match CI's two cores.
    pool: "forks",
    maxWorkers: 2,
  },
});
